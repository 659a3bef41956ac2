//! The plots of a sweep, as SVG text (plotters' SVG backend: no font files, no system
//! library): memory items and tokens that fit against each numeric knob, and the
//! plan-region map: over one or two knobs, which points make the same provider/profile
//! choice (one colour per choice, black boundaries between cells of different choices,
//! grey cells without a plan).

use std::collections::BTreeMap;

use plotters::coord::ranged1d::SegmentValue;
use plotters::prelude::*;
use serde::Serialize;

use super::sweep::SweepRow;
use super::StudyError;

/// The knobs whose values are numbers (line plots are drawn against them).
pub const NUMERIC_KNOBS: [&str; 5] = [
    "context",
    "sequences",
    "scheduled_tokens",
    "layers",
    "experts",
];

fn drawing<E: std::fmt::Debug>(error: E) -> StudyError {
    StudyError::Settings {
        path: "plot".into(),
        message: format!("cannot draw: {error:?}"),
    }
}

/// One region of a map: the points sharing a choice.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Region {
    /// The choice id (provider per node, profile per resource).
    pub choice_id: String,
    /// The providers this choice uses that some other region does not.
    pub label: String,
}

/// A plan-region map over one or two knobs (`y` has one empty value for one knob).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct RegionMap {
    /// The x knob.
    pub x_knob: String,
    /// Its values, in grid order.
    pub x_values: Vec<String>,
    /// The y knob (`None`: a one-knob map).
    pub y_knob: Option<String>,
    /// Its values, in grid order.
    pub y_values: Vec<String>,
    /// `cells[y][x]`: the index of the cell's region, `None` without a plan or a row.
    pub cells: Vec<Vec<Option<usize>>>,
    /// The regions, in order of first appearance.
    pub regions: Vec<Region>,
}

fn distinct(values: impl Iterator<Item = String>) -> Vec<String> {
    let mut seen = Vec::new();
    for value in values {
        if !seen.contains(&value) {
            seen.push(value);
        }
    }
    seen
}

impl RegionMap {
    /// The map of `rows` over `x_knob` (and `y_knob`): rows must differ only in those knobs
    /// (the caller groups them); a later row of the same cell is ignored.
    pub fn of(rows: &[&SweepRow], x_knob: &str, y_knob: Option<&str>) -> RegionMap {
        let x_values = distinct(rows.iter().map(|r| r.point.value(x_knob)));
        let y_values = match y_knob {
            Some(knob) => distinct(rows.iter().map(|r| r.point.value(knob))),
            None => vec![String::new()],
        };
        let mut cells = vec![vec![None; x_values.len()]; y_values.len()];
        let mut filled = vec![vec![false; x_values.len()]; y_values.len()];
        let mut choices: Vec<String> = Vec::new();
        let mut providers: Vec<Vec<String>> = Vec::new();
        for row in rows {
            let x = x_values.iter().position(|v| *v == row.point.value(x_knob));
            let y = match y_knob {
                Some(knob) => y_values.iter().position(|v| *v == row.point.value(knob)),
                None => Some(0),
            };
            let (Some(x), Some(y)) = (x, y) else { continue };
            if filled[y][x] {
                continue;
            }
            filled[y][x] = true;
            if let Some(choice) = &row.choice_id {
                let index = match choices.iter().position(|c| c == choice) {
                    Some(i) => i,
                    None => {
                        choices.push(choice.clone());
                        providers.push(row.providers.clone());
                        choices.len() - 1
                    }
                };
                cells[y][x] = Some(index);
            }
        }
        let regions = choices
            .iter()
            .zip(&providers)
            .map(|(choice, own)| {
                let special: Vec<&str> = own
                    .iter()
                    .filter(|p| !providers.iter().all(|other| other.contains(p)))
                    .map(String::as_str)
                    .collect();
                Region {
                    choice_id: choice.clone(),
                    label: if special.is_empty() {
                        "same providers, other storage profiles".to_owned()
                    } else {
                        special.join(" ")
                    },
                }
            })
            .collect();
        RegionMap {
            x_knob: x_knob.to_owned(),
            x_values,
            y_knob: y_knob.map(str::to_owned),
            y_values,
            cells,
            regions,
        }
    }

    /// The map as SVG text, titled `title`.
    pub fn svg(&self, title: &str) -> Result<String, StudyError> {
        let mut text = String::new();
        let legend_height = 22 * (self.regions.len() as u32 + 1);
        let (width, height) = (760u32, 320 + legend_height);
        {
            let root = SVGBackend::with_string(&mut text, (width, height)).into_drawing_area();
            root.fill(&WHITE).map_err(drawing)?;
            let (chart_area, legend) = root.split_vertically(320);
            let nx = self.x_values.len() as u32;
            let ny = self.y_values.len() as u32;
            let mut chart = ChartBuilder::on(&chart_area)
                .caption(title, ("sans-serif", 16))
                .margin(12)
                .x_label_area_size(40)
                .y_label_area_size(150)
                .build_cartesian_2d((0..nx).into_segmented(), (0..ny).into_segmented())
                .map_err(drawing)?;
            let xs = self.x_values.clone();
            let ys = self.y_values.clone();
            let label = |values: &[String], v: &SegmentValue<u32>| match v {
                SegmentValue::CenterOf(i) => values.get(*i as usize).cloned().unwrap_or_default(),
                _ => String::new(),
            };
            chart
                .configure_mesh()
                .disable_mesh()
                .x_desc(self.x_knob.as_str())
                .y_desc(self.y_knob.as_deref().unwrap_or(""))
                .x_labels(xs.len())
                .y_labels(ys.len().max(1))
                .x_label_formatter(&|v| label(&xs, v))
                .y_label_formatter(&|v| label(&ys, v))
                .draw()
                .map_err(drawing)?;
            let colour = |region: Option<usize>| match region {
                Some(i) => Palette99::pick(i).to_rgba(),
                None => RGBColor(200, 200, 200).to_rgba(),
            };
            for (y, row) in self.cells.iter().enumerate() {
                for (x, cell) in row.iter().enumerate() {
                    let (x, y) = (x as u32, y as u32);
                    chart
                        .draw_series(std::iter::once(Rectangle::new(
                            [
                                (SegmentValue::Exact(x), SegmentValue::Exact(y)),
                                (SegmentValue::Exact(x + 1), SegmentValue::Exact(y + 1)),
                            ],
                            colour(*cell).filled(),
                        )))
                        .map_err(drawing)?;
                }
            }
            // Boundaries: a thick line between neighbouring cells of different regions.
            let boundary = BLACK.stroke_width(3);
            for (y, row) in self.cells.iter().enumerate() {
                for (x, cell) in row.iter().enumerate() {
                    let (xu, yu) = (x as u32, y as u32);
                    if x + 1 < row.len() && row[x + 1] != *cell {
                        chart
                            .draw_series(std::iter::once(PathElement::new(
                                vec![
                                    (SegmentValue::Exact(xu + 1), SegmentValue::Exact(yu)),
                                    (SegmentValue::Exact(xu + 1), SegmentValue::Exact(yu + 1)),
                                ],
                                boundary,
                            )))
                            .map_err(drawing)?;
                    }
                    if y + 1 < self.cells.len() && self.cells[y + 1][x] != *cell {
                        chart
                            .draw_series(std::iter::once(PathElement::new(
                                vec![
                                    (SegmentValue::Exact(xu), SegmentValue::Exact(yu + 1)),
                                    (SegmentValue::Exact(xu + 1), SegmentValue::Exact(yu + 1)),
                                ],
                                boundary,
                            )))
                            .map_err(drawing)?;
                    }
                }
            }
            let font = ("sans-serif", 13).into_font();
            for (i, region) in self.regions.iter().enumerate() {
                let y = 6 + 22 * i as i32;
                legend
                    .draw(&Rectangle::new(
                        [(14, y), (30, y + 14)],
                        Palette99::pick(i).filled(),
                    ))
                    .map_err(drawing)?;
                let short = region.choice_id.get(..19).unwrap_or(&region.choice_id);
                legend
                    .draw(&Text::new(
                        format!("{short}  {}", region.label),
                        (38, y + 1),
                        font.clone(),
                    ))
                    .map_err(drawing)?;
            }
            let y = 6 + 22 * self.regions.len() as i32;
            legend
                .draw(&Rectangle::new(
                    [(14, y), (30, y + 14)],
                    RGBColor(200, 200, 200).filled(),
                ))
                .map_err(drawing)?;
            legend
                .draw(&Text::new("no plan (infeasible)", (38, y + 1), font))
                .map_err(drawing)?;
            root.present().map_err(drawing)?;
        }
        Ok(text)
    }
}

/// One line of a line plot.
#[derive(Clone, Debug)]
pub struct Series {
    /// Its legend.
    pub label: String,
    /// Its points (knob value, figure).
    pub points: Vec<(f64, f64)>,
}

/// A line plot of `series` against `knob` (y in `unit`), as SVG text.
pub fn line_plot(
    title: &str,
    knob: &str,
    unit: &str,
    series: &[Series],
) -> Result<String, StudyError> {
    let mut text = String::new();
    let all: Vec<&(f64, f64)> = series.iter().flat_map(|s| &s.points).collect();
    let x_max = all.iter().map(|p| p.0).fold(1.0, f64::max);
    let x_min = all.iter().map(|p| p.0).fold(x_max, f64::min);
    let y_max = all.iter().map(|p| p.1).fold(1.0, f64::max) * 1.05;
    let y_min = all.iter().map(|p| p.1).fold(0.0, f64::min);
    {
        let root = SVGBackend::with_string(&mut text, (760, 440)).into_drawing_area();
        root.fill(&WHITE).map_err(drawing)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 16))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(70)
            .build_cartesian_2d(x_min..x_max, y_min..y_max)
            .map_err(drawing)?;
        chart
            .configure_mesh()
            .x_desc(knob)
            .y_desc(unit)
            .draw()
            .map_err(drawing)?;
        for (i, s) in series.iter().enumerate() {
            let colour = Palette99::pick(i).to_rgba();
            chart
                .draw_series(LineSeries::new(
                    s.points.iter().copied(),
                    colour.stroke_width(2),
                ))
                .map_err(drawing)?
                .label(s.label.as_str())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], colour));
            chart
                .draw_series(s.points.iter().map(|p| Circle::new(*p, 3, colour.filled())))
                .map_err(drawing)?;
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .label_font(("sans-serif", 11))
            .draw()
            .map_err(drawing)?;
        root.present().map_err(drawing)?;
    }
    Ok(text)
}

/// Rows grouped by the values of every knob in `others` (in grid order of first row).
pub fn group_by<'a>(
    rows: &'a [SweepRow],
    others: &[&str],
) -> BTreeMap<usize, (String, Vec<&'a SweepRow>)> {
    let mut order: Vec<String> = Vec::new();
    let mut groups: BTreeMap<usize, (String, Vec<&SweepRow>)> = BTreeMap::new();
    for row in rows {
        let label = others
            .iter()
            .map(|k| format!("{k}={}", row.point.value(k)))
            .collect::<Vec<_>>()
            .join(" ");
        let index = match order.iter().position(|l| *l == label) {
            Some(i) => i,
            None => {
                order.push(label.clone());
                order.len() - 1
            }
        };
        groups
            .entry(index)
            .or_insert_with(|| (label, Vec::new()))
            .1
            .push(row);
    }
    groups
}

fn write_svg(dir: &std::path::Path, name: &str, svg: &str) -> Result<String, StudyError> {
    let file = dir.join(name);
    std::fs::write(&file, svg).map_err(|e| StudyError::Settings {
        path: file.display().to_string(),
        message: format!("cannot write the plot: {e}"),
    })?;
    Ok(name.to_owned())
}

fn figure(row: &SweepRow, item: &str) -> Option<f64> {
    let r = row.report.as_ref()?;
    Some(match item {
        "weights" => r.weights_bytes as f64,
        "KV per sequence" => r.kv_bytes_per_sequence as f64,
        "activations" => r.activation_bytes as f64,
        "workspaces" => r.workspace_bytes as f64,
        "headroom" => r.headroom_bytes as f64,
        "tokens that fit" => r.tokens_that_fit? as f64,
        _ => return None,
    })
}

const GIB: f64 = 1024.0 * 1024.0 * 1024.0;

/// Draws every plot of `rows` into `dir` (`varying`: the knobs with more than one value):
/// `memory-vs-KNOB.svg` and `tokens-vs-KNOB.svg` per numeric knob, and the region maps
/// (`regions.svg`, or `regions-N.svg` per combination of the knobs beyond the first two).
/// Returns the files written.
pub fn write_plots(
    dir: &std::path::Path,
    rows: &[SweepRow],
    varying: &[&str],
) -> Result<Vec<String>, StudyError> {
    let mut written = Vec::new();
    for knob in varying.iter().filter(|k| NUMERIC_KNOBS.contains(k)) {
        let others: Vec<&str> = varying.iter().copied().filter(|k| k != knob).collect();
        let groups = group_by(rows, &others);
        let mut memory = Vec::new();
        let mut tokens = Vec::new();
        for (label, members) in groups.values() {
            let points = |item: &str, scale: f64| -> Vec<(f64, f64)> {
                let mut points: Vec<(f64, f64)> = members
                    .iter()
                    .filter_map(|r| {
                        let x: f64 = r.point.value(knob).parse().ok()?;
                        Some((x, figure(r, item)? / scale))
                    })
                    .collect();
                points.sort_by(|a, b| a.0.total_cmp(&b.0));
                points
            };
            for item in [
                "weights",
                "KV per sequence",
                "activations",
                "workspaces",
                "headroom",
            ] {
                memory.push(Series {
                    label: format!("{item} {label}"),
                    points: points(item, GIB),
                });
            }
            tokens.push(Series {
                label: label.clone(),
                points: points("tokens that fit", 1.0),
            });
        }
        let svg = line_plot(
            &format!("memory items against {knob}"),
            knob,
            "GiB",
            &memory,
        )?;
        written.push(write_svg(dir, &format!("memory-vs-{knob}.svg"), &svg)?);
        let svg = line_plot(
            &format!("tokens of KV cache that fit against {knob}"),
            knob,
            "tokens",
            &tokens,
        )?;
        written.push(write_svg(dir, &format!("tokens-vs-{knob}.svg"), &svg)?);
    }
    let Some(x) = varying.first() else {
        return Ok(written);
    };
    let y = varying.get(1).copied();
    let rest: Vec<&str> = varying.iter().skip(2).copied().collect();
    let groups = group_by(rows, &rest);
    for (index, (label, members)) in groups.values().enumerate() {
        let map = RegionMap::of(members, x, y);
        let title = if label.is_empty() {
            "plan regions (one colour per provider/profile choice)".to_owned()
        } else {
            format!("plan regions, {label}")
        };
        let name = if groups.len() == 1 {
            "regions.svg".to_owned()
        } else {
            format!("regions-{}.svg", index + 1)
        };
        written.push(write_svg(dir, &name, &map.svg(&title)?)?);
    }
    Ok(written)
}
