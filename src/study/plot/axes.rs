//! A rectangular plot area's frame, grid lines, ticks, tick labels and axis names: what the
//! line panels and the Pareto plot share. A tick label that would touch its neighbour is
//! left out (its tick and grid line stay).

use super::super::StudyError;
use super::canvas::{text_width, Align, Canvas, Rect, Typography, HEADING, SMALL};
use super::scale::Scale;
use super::style::{GRID, INK};

/// The pixel x of `v` on `xs` across `area` (`None` off a log scale's domain).
pub fn at_x(area: Rect, xs: &Scale, v: f64) -> Option<f64> {
    xs.fraction(v).map(|f| area.x0 + f * (area.x1 - area.x0))
}

/// The pixel y of `v` on `ys` up `area`.
pub fn at_y(area: Rect, ys: &Scale, v: f64) -> Option<f64> {
    ys.fraction(v).map(|f| area.y1 - f * (area.y1 - area.y0))
}

/// Draws `area` as a plot area (recorded in the layout): grid lines at the ticks, the
/// frame, tick marks and labels, and `x_name` centred below the tick labels.
pub fn draw_axes(
    c: &mut Canvas,
    area: Rect,
    xs: &Scale,
    ys: &Scale,
    x_name: &str,
) -> Result<(), StudyError> {
    c.layout.plot_areas.push(area);
    for (v, _) in &ys.ticks {
        if let Some(y) = at_y(area, ys, *v) {
            c.line(&[(area.x0, y), (area.x1, y)], GRID, 1, None)?;
        }
    }
    for (v, _) in &xs.ticks {
        if let Some(x) = at_x(area, xs, *v) {
            c.line(&[(x, area.y0), (x, area.y1)], GRID, 1, None)?;
        }
    }
    c.rect(area, None, Some((INK, 1)))?;
    let mut last_right = f64::NEG_INFINITY;
    for (v, label) in &xs.ticks {
        let Some(x) = at_x(area, xs, *v) else {
            continue;
        };
        c.line(&[(x, area.y1), (x, area.y1 + 4.0)], INK, 1, None)?;
        let w = text_width(label, SMALL);
        if x - w / 2.0 > last_right + 3.0 {
            c.text(
                label,
                x,
                area.y1 + 12.0,
                Typography::new(SMALL, Align::Centre),
            )?;
            last_right = x + w / 2.0;
        }
    }
    let mut last_top = f64::INFINITY;
    for (v, label) in &ys.ticks {
        let Some(y) = at_y(area, ys, *v) else {
            continue;
        };
        c.line(&[(area.x0 - 4.0, y), (area.x0, y)], INK, 1, None)?;
        if y + SMALL * 0.7 < last_top {
            c.text(
                label,
                area.x0 - 6.0,
                y,
                Typography::new(SMALL, Align::Right),
            )?;
            last_top = y - SMALL * 0.7;
        }
    }
    x_axis_name(c, area, x_name)
}

/// The name of a plot area's x axis, centred below its tick labels.
pub fn x_axis_name(c: &mut Canvas, area: Rect, name: &str) -> Result<(), StudyError> {
    c.text(
        name,
        (area.x0 + area.x1) / 2.0,
        area.y1 + 30.0,
        Typography::new(HEADING, Align::Centre),
    )?;
    Ok(())
}
