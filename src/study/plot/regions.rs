//! Plan-region maps: over one or two knobs, which points make the same provider/profile
//! choice. Every map of a sweep colours and letters a choice alike: the choices are
//! numbered over the whole sweep, sorted by choice id ([`Choices`]), so the maps of the
//! two devices of one sweep agree. A cell shows its choice's colour and letter; thick
//! black lines separate neighbouring cells of different choices; a grey hatched cell has
//! no plan; a small ring marks a cell whose worst case does not fit, a small diamond one
//! whose context the model capped.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use super::super::sweep::{short_value, SweepRow};
use super::super::StudyError;
use super::axes::x_axis_name;
use super::canvas::{
    bold_width, text_width, Align, Canvas, Layout, Rect, Typography, HEADING, MARGIN, SMALL, TITLE,
};
use super::scale::count_label;
use super::style::{fill_colour, letter, marker_polygon, Marker, INK, NEUTRAL, NO_PLAN};

/// The plan choices of a whole sweep, numbered in choice-id order, with their labels.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Choices {
    /// Choice ids, sorted: a choice's index is its colour and letter on every map.
    pub ids: Vec<String>,
    /// Labels by index: the providers this choice uses that some other choice does not.
    pub labels: Vec<String>,
}

/// The longest label a legend shows (longer ones end in "…").
const LABEL_CHARS: usize = 70;

impl Choices {
    /// The choices of `rows` (every row of the sweep).
    pub fn of(rows: &[SweepRow]) -> Choices {
        let mut providers: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
        for row in rows {
            if let Some(choice) = &row.choice_id {
                providers
                    .entry(choice.as_str())
                    .or_insert_with(|| row.providers.iter().map(String::as_str).collect());
            }
        }
        let every: Vec<&BTreeSet<&str>> = providers.values().collect();
        let mut labels: Vec<String> = providers
            .values()
            .map(|own| {
                let special: Vec<&str> = own
                    .iter()
                    .copied()
                    .filter(|p| !every.iter().all(|other| other.contains(p)))
                    .collect();
                shorten(&special.join(" "))
            })
            .collect();
        // Two choices with the same providers differ in storage profiles: say so, with the
        // letters, so that no two labels read alike.
        let ids: Vec<String> = providers.keys().map(|k| (*k).to_owned()).collect();
        let texts = labels.clone();
        for (i, label) in labels.iter_mut().enumerate() {
            let twins: Vec<String> = texts
                .iter()
                .enumerate()
                .filter(|(j, t)| *j != i && **t == texts[i])
                .map(|(j, _)| letter(j))
                .collect();
            if !twins.is_empty() {
                let base = if label.is_empty() {
                    "same providers".to_owned()
                } else {
                    label.clone()
                };
                *label = format!("{base}; storage profiles differ from {}", twins.join(", "));
            } else if label.is_empty() {
                *label = "only the providers every choice uses".to_owned();
            }
        }
        Choices { ids, labels }
    }

    /// The index of `choice`.
    pub fn index(&self, choice: &str) -> Option<usize> {
        self.ids.binary_search_by(|c| c.as_str().cmp(choice)).ok()
    }
}

fn shorten(text: &str) -> String {
    if text.chars().count() <= LABEL_CHARS {
        return text.to_owned();
    }
    let cut: String = text.chars().take(LABEL_CHARS - 1).collect();
    format!("{cut}…")
}

/// One region of a map: the points sharing a choice.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Region {
    /// The choice id (provider per node, profile per resource).
    pub choice_id: String,
    /// The choice's index in the sweep (its colour and letter).
    pub index: usize,
    /// The providers this choice uses that some other choice of the sweep does not.
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
    /// `marks[y][x]`: (the worst case does not fit, the context was capped).
    pub marks: Vec<Vec<(bool, bool)>>,
    /// The regions of this map, in sweep order of their choices.
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
    /// The map of `rows` over `x_knob` (and `y_knob`), its choices numbered among the
    /// rows' own: rows must differ only in those knobs (the caller groups them); a later
    /// row of the same cell is ignored.
    pub fn of(rows: &[&SweepRow], x_knob: &str, y_knob: Option<&str>) -> RegionMap {
        let owned: Vec<SweepRow> = rows.iter().map(|r| (*r).clone()).collect();
        RegionMap::in_sweep(rows, x_knob, y_knob, &Choices::of(&owned))
    }

    /// The map of `rows` with the choices of the whole sweep (`choices`): every map of
    /// one sweep colours and letters a choice alike.
    pub fn in_sweep(
        rows: &[&SweepRow],
        x_knob: &str,
        y_knob: Option<&str>,
        choices: &Choices,
    ) -> RegionMap {
        let x_values = distinct(rows.iter().map(|r| r.point.value(x_knob)));
        let y_values = match y_knob {
            Some(knob) => distinct(rows.iter().map(|r| r.point.value(knob))),
            None => vec![String::new()],
        };
        let mut cells = vec![vec![None; x_values.len()]; y_values.len()];
        let mut marks = vec![vec![(false, false); x_values.len()]; y_values.len()];
        let mut filled = vec![vec![false; x_values.len()]; y_values.len()];
        let mut used: BTreeSet<usize> = BTreeSet::new();
        let mut sweep_index = vec![vec![None; x_values.len()]; y_values.len()];
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
            marks[y][x] = (row.status == "worst-case-exceeds", row.capped());
            if let Some(index) = row.choice_id.as_deref().and_then(|c| choices.index(c)) {
                used.insert(index);
                sweep_index[y][x] = Some(index);
            }
        }
        let order: Vec<usize> = used.into_iter().collect();
        for (y, row) in sweep_index.iter().enumerate() {
            for (x, index) in row.iter().enumerate() {
                cells[y][x] = index.and_then(|i| order.iter().position(|o| *o == i));
            }
        }
        let regions = order
            .iter()
            .map(|&i| Region {
                choice_id: choices.ids[i].clone(),
                index: i,
                label: choices.labels[i].clone(),
            })
            .collect();
        RegionMap {
            x_knob: x_knob.to_owned(),
            x_values,
            y_knob: y_knob.map(str::to_owned),
            y_values,
            cells,
            marks,
            regions,
        }
    }

    /// The map as SVG text, titled `title`.
    pub fn svg(&self, title: &str) -> Result<String, StudyError> {
        Ok(self.figure(title)?.0)
    }

    fn legend_lines(&self) -> Vec<(Option<usize>, String)> {
        let mut lines: Vec<(Option<usize>, String)> = self
            .regions
            .iter()
            .map(|r| {
                let hash = r.choice_id.trim_start_matches("sha256:");
                let short = hash.get(..8).unwrap_or(hash);
                (
                    Some(r.index),
                    format!("{}: {} ({short})", letter(r.index), r.label),
                )
            })
            .collect();
        if self.cells.iter().flatten().any(Option::is_none) {
            lines.push((None, "no plan".to_owned()));
        }
        lines
    }

    /// The map as SVG text and its layout.
    pub fn figure(&self, title: &str) -> Result<(String, Layout), StudyError> {
        const ROW: f64 = 20.0;
        let label = |knob: &str, value: &String| match value.parse::<f64>() {
            Ok(number) if super::NUMERIC_KNOBS.contains(&knob) => count_label(number),
            _ => short_value(knob, value),
        };
        let x_labels: Vec<String> = self
            .x_values
            .iter()
            .map(|v| label(&self.x_knob, v))
            .collect();
        let y_knob = self.y_knob.as_deref().unwrap_or("");
        let y_labels: Vec<String> = self.y_values.iter().map(|v| label(y_knob, v)).collect();
        let cell_w = x_labels
            .iter()
            .map(|l| text_width(l, SMALL) + 12.0)
            .fold(56.0, f64::max);
        let cell_h = 32.0;
        let y_label_w = y_labels
            .iter()
            .map(|l| text_width(l, SMALL))
            .chain([text_width(y_knob, HEADING)])
            .fold(0.0, f64::max);
        // The y knob's name stands above its labels, level with the map's top.
        let top = MARGIN
            + TITLE * 1.25
            + 10.0
            + if self.y_knob.is_some() {
                HEADING * 1.6
            } else {
                0.0
            };
        let x0 = MARGIN + y_label_w + 10.0;
        let nx = self.x_values.len() as f64;
        let ny = self.y_values.len() as f64;
        let area = Rect::new(x0, top, x0 + nx * cell_w, top + ny * cell_h);
        let lines = self.legend_lines();
        let marks_used = (
            self.marks.iter().flatten().any(|m| m.0),
            self.marks.iter().flatten().any(|m| m.1),
        );
        let mut legend_rows = lines.len() + usize::from(marks_used.0) + usize::from(marks_used.1);
        legend_rows += 1; // heading
        let legend_w = lines
            .iter()
            .map(|(_, l)| 30.0 + text_width(l, SMALL))
            .chain([text_width("context capped by the model", SMALL) + 30.0])
            .fold(
                bold_width("plan choice: what sets it apart (choice id)", SMALL),
                f64::max,
            )
            + 16.0;
        let legend_top = area.y1 + 46.0;
        let legend = Rect::new(
            MARGIN,
            legend_top,
            MARGIN + legend_w,
            legend_top + legend_rows as f64 * ROW + 8.0,
        );
        let width = (area.x1 + MARGIN)
            .max(legend.x1 + MARGIN)
            .max(bold_width(title, TITLE) + 2.0 * MARGIN)
            .ceil();
        let height = (legend.y1 + MARGIN).ceil();
        let mut text = String::new();
        let layout = {
            let mut c = Canvas::titled(&mut text, width as u32, height as u32, title)?;
            c.layout.plot_areas.push(area);
            for (y, row) in self.cells.iter().enumerate() {
                for (x, cell) in row.iter().enumerate() {
                    let r = Rect::new(
                        area.x0 + x as f64 * cell_w,
                        area.y0 + y as f64 * cell_h,
                        area.x0 + (x + 1) as f64 * cell_w,
                        area.y0 + (y + 1) as f64 * cell_h,
                    );
                    match cell {
                        Some(region) => {
                            let index = self.regions[*region].index;
                            c.rect(
                                r,
                                Some(fill_colour(index)),
                                Some((plotters::style::RGBAColor(255, 255, 255, 1.0), 1)),
                            )?;
                            let mid = ((r.x0 + r.x1) / 2.0, (r.y0 + r.y1) / 2.0);
                            let t = c.text(
                                &letter(index),
                                mid.0,
                                mid.1,
                                Typography::new(HEADING, Align::Centre).bold(),
                            )?;
                            c.layout.annotations.push(t);
                        }
                        None => hatch(&mut c, r)?,
                    }
                    let (exceeds, capped) = self.marks[y][x];
                    if exceeds {
                        c.circle((r.x1 - 8.0, r.y0 + 8.0), 4, None, Some((INK, 1)))?;
                    }
                    if capped {
                        capped_mark(&mut c, (r.x0 + 8.0, r.y0 + 8.0))?;
                    }
                }
            }
            // Boundaries: a thick line between neighbouring cells of different regions.
            for (y, row) in self.cells.iter().enumerate() {
                for (x, cell) in row.iter().enumerate() {
                    let (xl, yt) = (area.x0 + x as f64 * cell_w, area.y0 + y as f64 * cell_h);
                    if x + 1 < row.len() && row[x + 1] != *cell {
                        c.line(
                            &[(xl + cell_w, yt), (xl + cell_w, yt + cell_h)],
                            INK,
                            3,
                            None,
                        )?;
                    }
                    if y + 1 < self.cells.len() && self.cells[y + 1][x] != *cell {
                        c.line(
                            &[(xl, yt + cell_h), (xl + cell_w, yt + cell_h)],
                            INK,
                            3,
                            None,
                        )?;
                    }
                }
            }
            c.rect(area, None, Some((INK, 1)))?;
            for (x, label) in x_labels.iter().enumerate() {
                let mid = area.x0 + (x as f64 + 0.5) * cell_w;
                c.text(
                    label,
                    mid,
                    area.y1 + 12.0,
                    Typography::new(SMALL, Align::Centre),
                )?;
            }
            x_axis_name(&mut c, area, &self.x_knob)?;
            for (y, label) in y_labels.iter().enumerate() {
                let mid = area.y0 + (y as f64 + 0.5) * cell_h;
                c.text(
                    label,
                    area.x0 - 6.0,
                    mid,
                    Typography::new(SMALL, Align::Right),
                )?;
            }
            if let Some(knob) = &self.y_knob {
                c.text(
                    knob,
                    area.x0 - 6.0,
                    area.y0 - HEADING,
                    Typography::new(HEADING, Align::Right),
                )?;
            }
            c.layout.legends.push(legend);
            let mut y = legend.y0 + 4.0 + ROW / 2.0;
            let x = legend.x0 + 6.0;
            c.small("plan choice: what sets it apart (choice id)", x, y, true)?;
            y += ROW;
            for (index, line) in &lines {
                let swatch = Rect::new(x, y - 7.0, x + 18.0, y + 7.0);
                match index {
                    Some(i) => c.rect(swatch, Some(fill_colour(*i)), Some((NEUTRAL, 1)))?,
                    None => hatch(&mut c, swatch)?,
                }
                c.small(line, x + 26.0, y, false)?;
                y += ROW;
            }
            if marks_used.0 {
                c.circle((x + 9.0, y), 4, None, Some((INK, 1)))?;
                c.small("worst case does not fit", x + 26.0, y, false)?;
                y += ROW;
            }
            if marks_used.1 {
                capped_mark(&mut c, (x + 9.0, y))?;
                c.small("context capped by the model", x + 26.0, y, false)?;
            }
            c.finish()?
        };
        Ok((text, layout))
    }
}

/// The mark of a capped context: a small white diamond outlined in black.
fn capped_mark(c: &mut Canvas, at: (f64, f64)) -> Result<(), StudyError> {
    match marker_polygon(Marker::Diamond, at, 4.0) {
        Some(points) => c.polygon(
            &points,
            plotters::style::RGBAColor(255, 255, 255, 1.0),
            Some((INK, 1)),
        ),
        None => Ok(()),
    }
}

/// A cell without a plan: grey with diagonal hatching.
fn hatch(c: &mut Canvas, r: Rect) -> Result<(), StudyError> {
    c.rect(
        r,
        Some(NO_PLAN),
        Some((plotters::style::RGBAColor(255, 255, 255, 1.0), 1)),
    )?;
    let step = 8.0;
    let mut offset = step;
    let (w, h) = (r.x1 - r.x0, r.y1 - r.y0);
    while offset < w + h {
        // The segment of the line x + y = offset (cell coordinates) inside the cell.
        let start = (offset.min(w), offset - offset.min(w));
        let end = (offset - offset.min(h), offset.min(h));
        c.line(
            &[
                (r.x0 + start.0, r.y0 + start.1),
                (r.x0 + end.0, r.y0 + end.1),
            ],
            NEUTRAL,
            1,
            None,
        )?;
        offset += step;
    }
    Ok(())
}
