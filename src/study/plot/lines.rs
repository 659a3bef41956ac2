//! Line plots as small multiples: one panel per device or model (each with its own y
//! ticks when the scale is linear, one shared log2 scale otherwise), the series of a panel
//! told apart by colour and by marker and dash, the legend to the right of the panels,
//! and marks for points whose worst case does not fit (hollow marker), points without a
//! plan (a cross on the panel's floor) and points whose context the model capped (a ring).

use super::super::StudyError;
use super::axes::{at_x, at_y, draw_axes};
use super::canvas::{
    bold_width, text_width, Align, Canvas, Layout, Rect, Typography, HEADING, MARGIN, SMALL, TITLE,
};
use super::scale::{Scale, Unit};
use super::style::{line_colour, marker_polygon, series_style, Marker, INK, NEUTRAL};

/// One point of a series.
#[derive(Clone, Debug, PartialEq)]
pub struct LinePoint {
    /// The knob's value (as the grid asks for it).
    pub x: f64,
    /// The figure (`None`: no plan at this point).
    pub y: Option<f64>,
    /// Whether the policy's worst case fits.
    pub fits: bool,
    /// Whether the model capped the point's context.
    pub capped: bool,
}

/// One line.
#[derive(Clone, Debug, PartialEq)]
pub struct Series {
    /// Colour index (a legend entry of the colour block).
    pub colour: usize,
    /// Style index: marker and dash (a legend entry of the style block).
    pub style: usize,
    /// Its points, by x.
    pub points: Vec<LinePoint>,
}

/// One panel: a device, a model, or the whole sweep.
#[derive(Clone, Debug, PartialEq)]
pub struct Panel {
    /// Its title (short values of the panel knobs; empty for a single panel).
    pub title: String,
    /// Its lines.
    pub series: Vec<Series>,
}

/// A figure of line panels.
#[derive(Clone, Debug, PartialEq)]
pub struct LineFigure {
    /// The title.
    pub title: String,
    /// The x axis name.
    pub x_name: String,
    /// The y axis name.
    pub y_name: String,
    /// The y values' unit.
    pub y_unit: Unit,
    /// Log2 y (memory items spanning octaves) or linear from zero.
    pub y_log: bool,
    /// The panels.
    pub panels: Vec<Panel>,
    /// Legend of the colours (heading, labels by colour index; empty: colours follow
    /// the styles, one block).
    pub colours: (String, Vec<String>),
    /// Legend of the styles (heading, labels by style index).
    pub styles: (String, Vec<String>),
}

const PANEL_W: f64 = 250.0;
const PANEL_H: f64 = 180.0;
const GAP: f64 = 22.0;
const ROW: f64 = 17.0;

/// A legend entry's key.
enum Key {
    Line(usize, usize),
    Colour(usize),
    Style(usize),
    Fits,
    Exceeds,
    NoPlan,
    Capped,
}

impl LineFigure {
    fn x_values(&self) -> Vec<f64> {
        self.panels
            .iter()
            .flat_map(|p| &p.series)
            .flat_map(|s| s.points.iter().map(|p| p.x))
            .collect()
    }

    fn y_values<'a>(series: impl Iterator<Item = &'a Series>) -> Vec<f64> {
        series
            .flat_map(|s| s.points.iter().filter_map(|p| p.y))
            .collect()
    }

    fn y_scale(&self, panel: &Panel) -> Scale {
        if self.y_log {
            Scale::log2_span(
                &Self::y_values(self.panels.iter().flat_map(|p| &p.series)),
                self.y_unit,
            )
        } else {
            Scale::linear(&Self::y_values(panel.series.iter()), true, self.y_unit)
        }
    }

    fn legend_entries(&self) -> Vec<(Option<String>, Key, String)> {
        let mut entries = Vec::new();
        let combined = self.colours.1.is_empty();
        if combined {
            entries.push((
                Some(self.styles.0.clone()),
                Key::Style(usize::MAX),
                String::new(),
            ));
            for (i, label) in self.styles.1.iter().enumerate() {
                entries.push((None, Key::Line(i, i), label.clone()));
            }
        } else {
            entries.push((
                Some(self.colours.0.clone()),
                Key::Colour(usize::MAX),
                String::new(),
            ));
            for (i, label) in self.colours.1.iter().enumerate() {
                entries.push((None, Key::Colour(i), label.clone()));
            }
            if self.styles.1.len() > 1 {
                entries.push((
                    Some(self.styles.0.clone()),
                    Key::Style(usize::MAX),
                    String::new(),
                ));
                for (i, label) in self.styles.1.iter().enumerate() {
                    entries.push((None, Key::Style(i), label.clone()));
                }
            }
        }
        let points = || {
            self.panels
                .iter()
                .flat_map(|p| &p.series)
                .flat_map(|s| &s.points)
        };
        entries.push((Some("points".into()), Key::Fits, String::new()));
        entries.push((None, Key::Fits, "worst case fits".into()));
        if points().any(|p| p.y.is_some() && !p.fits) {
            entries.push((None, Key::Exceeds, "worst case does not fit".into()));
        }
        if points().any(|p| p.y.is_none()) {
            entries.push((None, Key::NoPlan, "no plan".into()));
        }
        if points().any(|p| p.capped) {
            entries.push((None, Key::Capped, "context capped by the model".into()));
        }
        entries
    }

    /// The figure as SVG text and its layout.
    pub fn svg(&self) -> Result<(String, Layout), StudyError> {
        let n = self.panels.len().max(1);
        let columns = if n <= 3 {
            n
        } else if n == 4 {
            2
        } else {
            3
        };
        let rows = n.div_ceil(columns);
        let scales: Vec<Scale> = self.panels.iter().map(|p| self.y_scale(p)).collect();
        let x_scale = Scale::for_knob(&self.x_values());
        let tick_w = scales
            .iter()
            .flat_map(|s| &s.ticks)
            .map(|(_, t)| text_width(t, SMALL))
            .fold(0.0, f64::max);
        let panel_left = tick_w + 10.0;
        let cell_w = panel_left + PANEL_W + GAP;
        let panel_top = if self.panels.iter().any(|p| !p.title.is_empty()) {
            20.0
        } else {
            4.0
        };
        let cell_h = panel_top + PANEL_H + 20.0 + 20.0 + GAP;
        let name_w = HEADING * 1.6;
        let top = MARGIN + TITLE * 1.25 + 10.0;
        let entries = self.legend_entries();
        let legend_w = entries
            .iter()
            .map(|(heading, _, label)| match heading {
                Some(h) => bold_width(h, SMALL),
                None => 40.0 + text_width(label, SMALL),
            })
            .fold(0.0, f64::max)
            + 16.0;
        let legend_h = entries.len() as f64 * ROW + 12.0;
        let panels_w = MARGIN + name_w + columns as f64 * cell_w;
        let width = (panels_w + legend_w + MARGIN)
            .max(bold_width(&self.title, TITLE) + 2.0 * MARGIN)
            .ceil();
        let height = (top + rows as f64 * cell_h)
            .max(top + legend_h + MARGIN)
            .ceil();
        let mut text = String::new();
        let layout = {
            let mut c = Canvas::titled(&mut text, width as u32, height as u32, &self.title)?;
            let plots_mid = top + rows as f64 * cell_h / 2.0;
            c.text(
                &self.y_name,
                MARGIN + name_w / 2.0,
                plots_mid,
                Typography::new(HEADING, Align::Centre).rotated(),
            )?;
            for (index, panel) in self.panels.iter().enumerate() {
                let (col, row) = ((index % columns) as f64, (index / columns) as f64);
                let x0 = MARGIN + name_w + col * cell_w + panel_left;
                let y0 = top + row * cell_h + panel_top;
                let area = Rect::new(x0, y0, x0 + PANEL_W, y0 + PANEL_H);
                self.draw_panel(&mut c, panel, area, &x_scale, &scales[index])?;
            }
            let legend = Rect::new(panels_w, top, panels_w + legend_w, top + legend_h);
            self.draw_legend(&mut c, legend, &entries)?;
            c.finish()?
        };
        Ok((text, layout))
    }

    fn draw_panel(
        &self,
        c: &mut Canvas,
        panel: &Panel,
        area: Rect,
        xs: &Scale,
        ys: &Scale,
    ) -> Result<(), StudyError> {
        draw_axes(c, area, xs, ys, &self.x_name)?;
        let at_x = |v: f64| at_x(area, xs, v);
        let at_y = |v: f64| at_y(area, ys, v);
        if !panel.title.is_empty() {
            c.text(
                &panel.title,
                (area.x0 + area.x1) / 2.0,
                area.y0 - 10.0,
                Typography::new(HEADING, Align::Centre).bold(),
            )?;
        }
        let styles = self.styles.1.len().max(1);
        let combined = self.colours.1.is_empty();
        // Lines first (widest first), then the marks on top.
        let mut order: Vec<&Series> = panel.series.iter().collect();
        order.sort_by_key(|s| s.style);
        for s in &order {
            let colour = line_colour(s.colour);
            let (_, dash, width) = series_style(s.style, styles);
            // A line joins neighbouring points with a plan; a missing plan breaks it.
            let mut run: Vec<(f64, f64)> = Vec::new();
            for p in &s.points {
                match (at_x(p.x), p.y.and_then(at_y)) {
                    (Some(x), Some(y)) => run.push((x, y)),
                    _ => {
                        if run.len() > 1 {
                            c.line(&run, colour, width, dash)?;
                        }
                        run.clear();
                    }
                }
            }
            if run.len() > 1 {
                c.line(&run, colour, width, dash)?;
            }
        }
        let mut crosses: Vec<(usize, i64)> = Vec::new();
        for s in &order {
            let colour = line_colour(s.colour);
            let (marker, _, _) = series_style(s.style, styles);
            for p in &s.points {
                let Some(x) = at_x(p.x) else { continue };
                match p.y.and_then(at_y) {
                    Some(y) => {
                        if p.capped {
                            c.circle((x, y), 9, None, Some((INK, 1)))?;
                        }
                        draw_marker(c, marker, (x, y), colour, p.fits)?;
                    }
                    None if p.y.is_none() && !crosses.contains(&(s.style, x.round() as i64)) => {
                        crosses.push((s.style, x.round() as i64));
                        let colour = if combined { colour } else { NEUTRAL };
                        let y = area.y1 - 7.0 - 11.0 * s.style as f64;
                        cross(c, (x, y), colour)?;
                    }
                    None => {}
                }
            }
        }
        Ok(())
    }

    fn draw_legend(
        &self,
        c: &mut Canvas,
        legend: Rect,
        entries: &[(Option<String>, Key, String)],
    ) -> Result<(), StudyError> {
        c.layout.legends.push(legend);
        let styles = self.styles.1.len().max(1);
        let mut y = legend.y0 + 6.0 + ROW / 2.0;
        let x = legend.x0 + 8.0;
        for (heading, key, label) in entries {
            if let Some(h) = heading {
                c.small(h, x, y, true)?;
                y += ROW;
                continue;
            }
            let key_mid = (x + 14.0, y);
            match key {
                Key::Line(colour, style) => {
                    let (marker, dash, _) = series_style(*style, styles);
                    c.line(&[(x, y), (x + 28.0, y)], line_colour(*colour), 2, dash)?;
                    draw_marker(c, marker, key_mid, line_colour(*colour), true)?;
                }
                Key::Colour(colour) => {
                    c.line(&[(x, y), (x + 28.0, y)], line_colour(*colour), 3, None)?;
                }
                Key::Style(style) => {
                    let (marker, dash, _) = series_style(*style, styles);
                    c.line(&[(x, y), (x + 28.0, y)], NEUTRAL, 2, dash)?;
                    draw_marker(c, marker, key_mid, NEUTRAL, true)?;
                }
                Key::Fits => draw_marker(c, Marker::Circle, key_mid, NEUTRAL, true)?,
                Key::Exceeds => draw_marker(c, Marker::Circle, key_mid, NEUTRAL, false)?,
                Key::NoPlan => cross(c, key_mid, NEUTRAL)?,
                Key::Capped => {
                    c.circle(key_mid, 9, None, Some((INK, 1)))?;
                    draw_marker(c, Marker::Circle, key_mid, NEUTRAL, true)?;
                }
            }
            c.small(label, x + 36.0, y, false)?;
            y += ROW;
        }
        Ok(())
    }
}

/// A marker, filled (the worst case fits) or hollow (it does not).
pub(crate) fn draw_marker(
    c: &mut Canvas,
    marker: Marker,
    at: (f64, f64),
    colour: plotters::style::RGBAColor,
    filled: bool,
) -> Result<(), StudyError> {
    let fill = if filled {
        colour
    } else {
        plotters::style::RGBAColor(255, 255, 255, 1.0)
    };
    match marker_polygon(marker, at, 4.5) {
        Some(points) => c.polygon(&points, fill, Some((colour, 2))),
        None => c.circle(at, 4, Some(fill), Some((colour, 2))),
    }
}

/// The no-plan mark: a cross.
fn cross(
    c: &mut Canvas,
    (x, y): (f64, f64),
    colour: plotters::style::RGBAColor,
) -> Result<(), StudyError> {
    let r = 4.0;
    c.line(&[(x - r, y - r), (x + r, y + r)], colour, 2, None)?;
    c.line(&[(x - r, y + r), (x + r, y - r)], colour, 2, None)
}
