//! The Pareto plot of a sweep with a serving point, in aiconfigurator's convention: output
//! tokens per second per user (x, interactivity) against output tokens per second per
//! device (y, cost efficiency). Every priced row is a point, coloured by its series (the
//! varying knobs other than concurrency, whose points a thin line joins in order of
//! concurrency); the frontier (the points no other point beats on both axes) is a black
//! line through emphasized points, each labelled by the knob values that set it apart
//! (`tp4 c32 fp8`). An axis whose values span a factor of four or more is logarithmic.
//!
//! Labels are placed beside their points, never over another label or point and inside
//! the plot area; a label that finds no free place within reach goes to the legend as a
//! numbered entry and its point gets the number.

use super::super::StudyError;
use super::axes::{at_x, at_y, draw_axes};
use super::canvas::{
    bold_width, text_width, Align, Canvas, Layout, Rect, Typography, HEADING, MARGIN, SMALL, TITLE,
};
use super::lines::draw_marker;
use super::scale::{Scale, Unit};
use super::style::{line_colour, Marker, INK, NEUTRAL};
use plotters::style::Color;

/// One priced point.
#[derive(Clone, Debug, PartialEq)]
pub struct ParetoPoint {
    /// Output tokens per second per user.
    pub per_user: f64,
    /// Output tokens per second per device.
    pub per_device: f64,
    /// What sets the point apart (`tp4 c32 fp8`).
    pub label: String,
    /// Its series (colour index; points of a series are joined in order of `order`).
    pub series: usize,
    /// Its place along its series' line (the concurrency).
    pub order: f64,
}

/// The indices of the points on the Pareto frontier (maximizing both figures), by
/// ascending per-user figure: a point is on it when no other point is at least as good on
/// both axes and better on one. Points with a non-finite figure are never on it.
pub fn frontier(points: &[(f64, f64)]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..points.len())
        .filter(|&i| points[i].0.is_finite() && points[i].1.is_finite())
        .collect();
    // By x descending; within equal x, by y descending.
    order.sort_by(|&a, &b| {
        points[b]
            .0
            .total_cmp(&points[a].0)
            .then(points[b].1.total_cmp(&points[a].1))
    });
    let mut front = Vec::new();
    // The best y among the points of strictly larger x.
    let mut best = f64::NEG_INFINITY;
    let mut at = 0;
    while at < order.len() {
        let x = points[order[at]].0;
        let group_end = order[at..]
            .iter()
            .position(|&i| points[i].0 != x)
            .map_or(order.len(), |n| at + n);
        let top = points[order[at]].1;
        if top > best {
            front.extend(
                order[at..group_end]
                    .iter()
                    .copied()
                    .filter(|&i| points[i].1 == top),
            );
        }
        best = best.max(top);
        at = group_end;
    }
    front.sort_by(|&a, &b| points[a].0.total_cmp(&points[b].0).then(a.cmp(&b)));
    front
}

/// The Pareto figure's data.
#[derive(Clone, Debug, PartialEq)]
pub struct ParetoFigure {
    /// The title.
    pub title: String,
    /// The points.
    pub points: Vec<ParetoPoint>,
    /// Legend heading of the series and their labels by index (one unlabelled series:
    /// no series block).
    pub series: (String, Vec<String>),
    /// Notes under the legend (points not drawn, what priced the times, in words).
    pub notes: Vec<String>,
}

const PLOT_W: f64 = 560.0;
const PLOT_H: f64 = 380.0;
const ROW: f64 = 17.0;
/// Marker radius of a point, pixels.
const DOT: f64 = 4.5;
/// Radius of the ring around a frontier point, pixels.
const RING: f64 = 8.0;

/// The scale of one axis: logarithmic (decades) when the values span a factor of four or
/// more, else linear from zero; beyond the largest value it leaves room for labels (up to
/// `headroom` times it on a log axis, a quarter of that excess on a linear one).
fn axis_scale(values: &[f64], headroom: f64) -> Scale {
    let low = values.iter().copied().fold(f64::INFINITY, f64::min);
    let high = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let mut room = values.to_vec();
    if low > 0.0 && high / low >= 4.0 {
        room.push(high * headroom);
        Scale::log_decades(&room, Unit::Count)
    } else {
        if high.is_finite() {
            room.push(high * (1.0 + (headroom - 1.0) / 4.0));
        }
        Scale::linear(&room, true, Unit::Count)
    }
}

fn axis_name(base: &str, scale: &Scale) -> String {
    if scale.log2 {
        format!("{base} (log scale)")
    } else {
        base.to_owned()
    }
}

/// Where the labels of the frontier's points go: a text box per point, or `None` when the
/// labels go to the legend as numbered entries.
struct Placed {
    boxes: Vec<(usize, Rect, String)>,
    numbered: bool,
}

/// Candidate boxes for a `w` x `h` label beside the point at `(x, y)`, nearest first: right,
/// left, above, below and the diagonals, at growing distances.
fn candidates(x: f64, y: f64, w: f64, h: f64) -> Vec<Rect> {
    let mut out = Vec::new();
    for step in [0.0, 10.0, 22.0, 36.0, 54.0] {
        let d = RING + 4.0 + step;
        let spots = [
            (x + d, y - h / 2.0),
            (x - d - w, y - h / 2.0),
            (x - w / 2.0, y - d - h),
            (x - w / 2.0, y + d),
            (x + d * 0.7, y - d * 0.7 - h),
            (x + d * 0.7, y + d * 0.7),
            (x - d * 0.7 - w, y - d * 0.7 - h),
            (x - d * 0.7 - w, y + d * 0.7),
        ];
        // On whole pixels: the text is drawn where its box says (the canvas rounds).
        out.extend(spots.iter().map(|&(x0, y0)| {
            let (x0, mid) = (x0.round(), (y0 + h / 2.0).round());
            Rect::new(x0, mid - h / 2.0, x0 + w, mid + h / 2.0)
        }));
    }
    out
}

/// Places every label greedily, left to right; `None` when one finds no place.
fn place_labels(
    area: Rect,
    spots: &[(usize, f64, f64, String)],
    marks: &[Rect],
) -> Option<Vec<(usize, Rect, String)>> {
    let inner = Rect::new(area.x0 + 2.0, area.y0 + 2.0, area.x1 - 2.0, area.y1 - 2.0);
    let mut placed: Vec<(usize, Rect, String)> = Vec::new();
    for (index, x, y, text) in spots {
        let w = text_width(text, SMALL);
        let h = SMALL * 1.25;
        let free = |r: &Rect| {
            inner.contains(r)
                && !placed.iter().any(|(_, p, _)| p.overlaps(r))
                && !marks.iter().any(|m| m.overlaps(r))
        };
        let spot = candidates(*x, *y, w, h).into_iter().find(free)?;
        placed.push((*index, spot, text.clone()));
    }
    Some(placed)
}

impl ParetoFigure {
    /// The figure as SVG text and its layout.
    pub fn svg(&self) -> Result<(String, Layout), StudyError> {
        let xs: Vec<f64> = self.points.iter().map(|p| p.per_user).collect();
        let ys: Vec<f64> = self.points.iter().map(|p| p.per_device).collect();
        // Room to the right and above the data for the frontier's labels.
        let x_scale = axis_scale(&xs, 2.5);
        let y_scale = axis_scale(&ys, 1.2);
        let front = frontier(
            &self
                .points
                .iter()
                .map(|p| (p.per_user, p.per_device))
                .collect::<Vec<_>>(),
        );
        let tick_w = y_scale
            .ticks
            .iter()
            .map(|(_, t)| text_width(t, SMALL))
            .fold(0.0, f64::max);
        let name_w = HEADING * 1.6;
        let top = MARGIN + TITLE * 1.25 + 14.0;
        let x0 = MARGIN + name_w + tick_w + 10.0;
        let area = Rect::new(x0, top, x0 + PLOT_W, top + PLOT_H);
        let pixel = |p: &ParetoPoint| {
            at_x(area, &x_scale, p.per_user).zip(at_y(area, &y_scale, p.per_device))
        };
        // Every point's marker box (a frontier point's with its ring).
        let marks: Vec<Rect> = self
            .points
            .iter()
            .enumerate()
            .filter_map(|(i, p)| {
                let r = if front.contains(&i) {
                    RING + 1.5
                } else {
                    DOT + 1.0
                };
                pixel(p).map(|(x, y)| Rect::new(x - r, y - r, x + r, y + r))
            })
            .collect();
        let spots: Vec<(usize, f64, f64, String)> = front
            .iter()
            .filter_map(|&i| {
                pixel(&self.points[i]).map(|(x, y)| (i, x, y, self.points[i].label.clone()))
            })
            .collect();
        let placed = match place_labels(area, &spots, &marks) {
            Some(boxes) => Placed {
                boxes,
                numbered: false,
            },
            None => {
                let numbers: Vec<(usize, f64, f64, String)> = spots
                    .iter()
                    .enumerate()
                    .map(|(n, (i, x, y, _))| (*i, *x, *y, (n + 1).to_string()))
                    .collect();
                Placed {
                    boxes: place_labels(area, &numbers, &marks).unwrap_or_default(),
                    numbered: true,
                }
            }
        };
        // The legend: series, the frontier key, numbered labels, notes.
        let mut entries: Vec<(Option<usize>, String, bool)> = Vec::new();
        if self.series.1.len() > 1 {
            entries.push((None, self.series.0.clone(), true));
            for (i, label) in self.series.1.iter().enumerate() {
                entries.push((Some(i), label.clone(), false));
            }
        }
        let frontier_key = entries.len();
        entries.push((None, "Pareto frontier".to_owned(), false));
        if placed.numbered {
            entries.push((None, "frontier points, left to right".to_owned(), true));
            for (n, (i, _, _, _)) in spots.iter().enumerate() {
                entries.push((None, format!("{}: {}", n + 1, self.points[*i].label), false));
            }
        }
        for note in &self.notes {
            entries.push((None, note.clone(), false));
        }
        let legend_w = entries
            .iter()
            .map(|(_, label, heading)| {
                if *heading {
                    bold_width(label, SMALL)
                } else {
                    40.0 + text_width(label, SMALL)
                }
            })
            .fold(0.0, f64::max)
            + 16.0;
        let legend_x = area.x1 + 24.0;
        let legend = Rect::new(
            legend_x,
            top,
            legend_x + legend_w,
            top + entries.len() as f64 * ROW + 12.0,
        );
        let width = (legend.x1 + MARGIN)
            .max(bold_width(&self.title, TITLE) + 2.0 * MARGIN)
            .ceil();
        let height = (area.y1 + 44.0 + MARGIN).max(legend.y1 + MARGIN).ceil();
        let mut text = String::new();
        let layout = {
            let mut c = Canvas::titled(&mut text, width as u32, height as u32, &self.title)?;
            c.text(
                &axis_name("output tokens/s per device", &y_scale),
                MARGIN + name_w / 2.0,
                (area.y0 + area.y1) / 2.0,
                Typography::new(HEADING, Align::Centre).rotated(),
            )?;
            draw_axes(
                &mut c,
                area,
                &x_scale,
                &y_scale,
                &axis_name("output tokens/s per user", &x_scale),
            )?;
            let colour = |series: usize| {
                if self.series.1.len() > 1 {
                    line_colour(series)
                } else {
                    NEUTRAL
                }
            };
            // Each series' line, in order of concurrency.
            for series in 0..self.series.1.len().max(1) {
                let mut members: Vec<&ParetoPoint> =
                    self.points.iter().filter(|p| p.series == series).collect();
                members.sort_by(|a, b| a.order.total_cmp(&b.order));
                let line: Vec<(f64, f64)> = members.iter().filter_map(|p| pixel(p)).collect();
                if line.len() > 1 {
                    c.line(&line, colour(series).mix(0.55), 1, None)?;
                }
            }
            // The frontier under the points.
            let front_line: Vec<(f64, f64)> = front
                .iter()
                .filter_map(|&i| pixel(&self.points[i]))
                .collect();
            if front_line.len() > 1 {
                c.line(&front_line, INK, 2, None)?;
            }
            for p in &self.points {
                if let Some(at) = pixel(p) {
                    draw_marker(&mut c, Marker::Circle, at, colour(p.series), true)?;
                }
            }
            for &i in &front {
                if let Some(at) = pixel(&self.points[i]) {
                    c.circle(at, RING as u32, None, Some((INK, 2)))?;
                }
            }
            c.layout.marks.extend(marks);
            for (i, rect, label) in &placed.boxes {
                if let Some((x, y)) = pixel(&self.points[*i]) {
                    // A leader line from the ring to a label that does not touch it: the
                    // nearest point of the label's box, when it is more than a few pixels
                    // off the ring (a label beside its point needs none).
                    let (nx, ny) = (x.clamp(rect.x0, rect.x1), y.clamp(rect.y0, rect.y1));
                    let gap = (nx - x).hypot(ny - y);
                    if gap > RING + 10.0 {
                        let along = RING / gap;
                        let from = (x + (nx - x) * along, y + (ny - y) * along);
                        c.line(&[from, (nx, ny)], NEUTRAL, 1, None)?;
                    }
                }
                let t = c.small(label, rect.x0, (rect.y0 + rect.y1) / 2.0, false)?;
                c.layout.annotations.push(t);
            }
            // The legend.
            c.layout.legends.push(legend);
            let mut y = legend.y0 + 6.0 + ROW / 2.0;
            let x = legend.x0 + 8.0;
            for (index, (series, label, heading)) in entries.iter().enumerate() {
                if *heading {
                    c.small(label, x, y, true)?;
                    y += ROW;
                    continue;
                }
                let mid = (x + 14.0, y);
                match series {
                    Some(s) => {
                        c.line(&[(x, y), (x + 28.0, y)], colour(*s).mix(0.55), 1, None)?;
                        draw_marker(&mut c, Marker::Circle, mid, colour(*s), true)?;
                    }
                    None if index == frontier_key => {
                        c.line(&[(x, y), (x + 28.0, y)], INK, 2, None)?;
                        draw_marker(&mut c, Marker::Circle, mid, NEUTRAL, true)?;
                        c.circle(mid, RING as u32, None, Some((INK, 2)))?;
                    }
                    None => {}
                }
                c.small(label, x + 36.0, y, false)?;
                y += ROW;
            }
            c.finish()?
        };
        Ok((text, layout))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn crowded(n: usize) -> ParetoFigure {
        // Every point on the frontier (per-user up, per-device down), labels long.
        ParetoFigure {
            title: "crowded".to_owned(),
            points: (0..n)
                .map(|i| ParetoPoint {
                    per_user: 10.0 + i as f64,
                    per_device: 1000.0 - 9.0 * i as f64,
                    label: format!("awq-int4 tp{} c{} #{i}", i % 8 + 1, 1 << (i % 9)),
                    series: i % 3,
                    order: i as f64,
                })
                .collect(),
            series: (
                "weight_format".to_owned(),
                vec!["a".into(), "b".into(), "c".into()],
            ),
            notes: vec![
                "times: serving simulation on the placement".to_owned(),
                "engine time profile: vLLM".to_owned(),
            ],
        }
    }

    #[test]
    fn crowded_labels_never_cover_each_other_or_a_point_and_every_frontier_point_is_named() {
        for n in [2, 6, 20, 60] {
            let figure = crowded(n);
            let (_, layout) = figure.svg().unwrap();
            let notes = &layout.annotations;
            for (i, a) in notes.iter().enumerate() {
                assert!(notes[i + 1..].iter().all(|b| !a.overlaps(b)), "{n}: {a:?}");
                assert!(layout.marks.iter().all(|m| !a.overlaps(m)), "{n}: {a:?}");
            }
            let canvas = Rect::new(0.0, 0.0, f64::from(layout.width), f64::from(layout.height));
            assert!(layout.texts.iter().all(|(_, r)| canvas.contains(r)), "{n}");
            // Each label is beside its point or, numbered, in the legend (a few points are
            // labelled beside them; 60 crowded ones do not fit and go numbered).
            let texts: Vec<&str> = layout.texts.iter().map(|(t, _)| t.as_str()).collect();
            let numbered = texts.contains(&"frontier points, left to right");
            assert!(
                if n <= 6 {
                    !numbered
                } else {
                    n < 60 || numbered
                },
                "{n}"
            );
            for p in &figure.points {
                assert!(
                    texts
                        .iter()
                        .any(|t| *t == p.label || t.ends_with(&format!(": {}", p.label))),
                    "{n}: {} is not named",
                    p.label
                );
            }
        }
    }
}
