//! Drawing in pixels on plotters' SVG backend, recording the layout: the rectangles of
//! the plot areas (where data is drawn), of the legends, of data annotations, and the
//! estimated box of every text. The layout places legends and labels outside the plot
//! areas and inside the canvas; a figure test measures the same texts with a real font
//! (resvg's usvg) against the recorded rectangles.

use plotters::element::DashedPathElement;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use serde::Serialize;

use super::super::StudyError;

/// An axis-aligned rectangle in pixels (`x0 <= x1`, `y0 <= y1`).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Rect {
    /// Left.
    pub x0: f64,
    /// Top.
    pub y0: f64,
    /// Right.
    pub x1: f64,
    /// Bottom.
    pub y1: f64,
}

impl Rect {
    /// The rectangle from its corners.
    pub fn new(x0: f64, y0: f64, x1: f64, y1: f64) -> Rect {
        Rect { x0, y0, x1, y1 }
    }

    /// Whether the two share interior area.
    pub fn overlaps(&self, other: &Rect) -> bool {
        self.x0 < other.x1 && other.x0 < self.x1 && self.y0 < other.y1 && other.y0 < self.y1
    }

    /// Whether `other` lies within this rectangle.
    pub fn contains(&self, other: &Rect) -> bool {
        self.x0 <= other.x0 && other.x1 <= self.x1 && self.y0 <= other.y0 && other.y1 <= self.y1
    }
}

/// Where a figure's parts lie: the contract a figure test checks.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Layout {
    /// Canvas width in pixels.
    pub width: u32,
    /// Canvas height in pixels.
    pub height: u32,
    /// The plot areas (one per panel): only data, grid lines and annotations inside.
    pub plot_areas: Vec<Rect>,
    /// The legends' boxes.
    pub legends: Vec<Rect>,
    /// Boxes inside plot areas where a text belongs to the data (a cell's letter).
    pub annotations: Vec<Rect>,
    /// Every text with its estimated box.
    pub texts: Vec<(String, Rect)>,
    /// The boxes of data markers (the Pareto plot's points): no annotation may cover one.
    pub marks: Vec<Rect>,
}

/// The blank border of every figure, pixels.
pub const MARGIN: f64 = 12.0;

/// Text sizes in SVG pixels.
pub const TITLE: f64 = 15.0;
/// Panel titles and axis names.
pub const HEADING: f64 = 12.5;
/// Tick labels and legend entries.
pub const SMALL: f64 = 11.0;

/// The width of `text` at `size` pixels, estimated from DejaVu Sans's advance widths (a
/// wide sans-serif: other fonts are narrower) by character class, rounded up.
pub fn text_width(text: &str, size: f64) -> f64 {
    let em: f64 = text
        .chars()
        .map(|c| match c {
            'i' | 'l' | 'j' | '.' | ',' | ':' | ';' | '\'' | '|' | '!' => 0.30,
            'f' | 't' | 'r' | '(' | ')' | '[' | ']' | '-' | ' ' | '/' => 0.42,
            'm' | 'w' | 'M' | 'W' | '%' => 0.98,
            '>' | '<' | '=' | '+' | '~' | '×' => 0.86,
            'A'..='Z' => 0.76,
            '0'..='9' => 0.64,
            _ => 0.62,
        })
        .sum();
    (em * size).ceil() + 2.0
}

/// The width of `text` in bold (about an eighth wider).
pub fn bold_width(text: &str, size: f64) -> f64 {
    (text_width(text, size) * 1.13).ceil()
}

/// A canvas on plotters' SVG backend with its layout.
pub struct Canvas<'a> {
    area: DrawingArea<SVGBackend<'a>, plotters::coord::Shift>,
    /// The layout drawn so far.
    pub layout: Layout,
}

pub(crate) fn drawing<E: std::fmt::Debug>(error: E) -> StudyError {
    StudyError::Settings {
        path: "plot".into(),
        message: format!("cannot draw: {error:?}"),
    }
}

/// Horizontal anchor of a text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Align {
    /// The position is the text's left end.
    Left,
    /// The position is the text's centre.
    Centre,
    /// The position is the text's right end.
    Right,
}

/// How a text is set: its size, how it hangs on its position, its weight and its direction.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Typography {
    /// Font size in pixels.
    pub size: f64,
    /// Horizontal anchor of a horizontal text.
    pub align: Align,
    /// Bold weight.
    pub bold: bool,
    /// Read bottom to top (a y-axis name), centred on the position.
    pub rotated: bool,
}

impl Typography {
    /// Regular weight, horizontal, `size` pixels, anchored by `align`.
    pub const fn new(size: f64, align: Align) -> Typography {
        Typography {
            size,
            align,
            bold: false,
            rotated: false,
        }
    }

    /// The same in bold.
    pub const fn bold(self) -> Typography {
        Typography { bold: true, ..self }
    }

    /// The same read bottom to top, centred on the position.
    pub const fn rotated(self) -> Typography {
        Typography {
            rotated: true,
            ..self
        }
    }
}

/// A dash pattern: dash and gap in pixels (`None`: solid).
pub type Dash = Option<(u32, u32)>;

fn px(v: f64) -> i32 {
    v.round() as i32
}

impl<'a> Canvas<'a> {
    /// A white canvas of `width` x `height` pixels writing into `text`.
    pub fn new(text: &'a mut String, width: u32, height: u32) -> Result<Canvas<'a>, StudyError> {
        let area = SVGBackend::with_string(text, (width, height)).into_drawing_area();
        area.fill(&WHITE).map_err(drawing)?;
        Ok(Canvas {
            area,
            layout: Layout {
                width,
                height,
                ..Layout::default()
            },
        })
    }

    /// A white canvas with `title` in bold at its top left.
    pub fn titled(
        text: &'a mut String,
        width: u32,
        height: u32,
        title: &str,
    ) -> Result<Canvas<'a>, StudyError> {
        let mut c = Canvas::new(text, width, height)?;
        c.text(
            title,
            MARGIN,
            MARGIN + TITLE * 0.7,
            Typography::new(TITLE, Align::Left).bold(),
        )?;
        Ok(c)
    }

    /// Writes the SVG out.
    pub fn finish(self) -> Result<Layout, StudyError> {
        self.area.present().map_err(drawing)?;
        Ok(self.layout)
    }

    /// Draws `text` at `(x, y)` as `set` says: `y` is the vertical centre of the line; a
    /// rotated text reads bottom to top (a y-axis name), centred on `(x, y)`.
    pub fn text(
        &mut self,
        text: &str,
        x: f64,
        y: f64,
        set: Typography,
    ) -> Result<Rect, StudyError> {
        let Typography {
            size,
            align,
            bold,
            rotated,
        } = set;
        let width = if bold {
            bold_width(text, size)
        } else {
            text_width(text, size)
        };
        let height = size * 1.25;
        let rect = if rotated {
            Rect::new(
                x - height / 2.0,
                y - width / 2.0,
                x + height / 2.0,
                y + width / 2.0,
            )
        } else {
            let x0 = match align {
                Align::Left => x,
                Align::Centre => x - width / 2.0,
                Align::Right => x - width,
            };
            Rect::new(x0, y - height / 2.0, x0 + width, y + height / 2.0)
        };
        let h = match align {
            Align::Left => HPos::Left,
            Align::Centre => HPos::Center,
            Align::Right => HPos::Right,
        };
        // plotters writes font-size = size / 1.24.
        let mut font = FontDesc::new(
            FontFamily::SansSerif,
            size * 1.24,
            if bold {
                FontStyle::Bold
            } else {
                FontStyle::Normal
            },
        );
        if rotated {
            font = font.transform(FontTransform::Rotate270);
        }
        let style = font.color(&BLACK).pos(Pos::new(
            if rotated { HPos::Center } else { h },
            VPos::Center,
        ));
        self.area
            .draw(&Text::new(text.to_owned(), (px(x), px(y)), style))
            .map_err(drawing)?;
        self.layout.texts.push((text.to_owned(), rect));
        Ok(rect)
    }

    /// A small text (a legend entry, a tick) left-aligned at `(x, y)`; bold for a heading.
    pub fn small(&mut self, text: &str, x: f64, y: f64, bold: bool) -> Result<Rect, StudyError> {
        self.text(
            text,
            x,
            y,
            Typography {
                bold,
                ..Typography::new(SMALL, Align::Left)
            },
        )
    }

    /// A polyline in `colour`, `width` pixels wide, solid or dashed.
    pub fn line(
        &mut self,
        points: &[(f64, f64)],
        colour: RGBAColor,
        width: u32,
        dash: Dash,
    ) -> Result<(), StudyError> {
        let points: Vec<(i32, i32)> = points.iter().map(|&(x, y)| (px(x), px(y))).collect();
        let style = ShapeStyle {
            color: colour,
            filled: false,
            stroke_width: width,
        };
        match dash {
            None => self
                .area
                .draw(&PathElement::new(points, style))
                .map_err(drawing),
            Some((on, off)) => self
                .area
                .draw(&DashedPathElement::new(points, on, off, style))
                .map_err(drawing),
        }
    }

    /// A rectangle, filled and/or outlined.
    pub fn rect(
        &mut self,
        rect: Rect,
        fill: Option<RGBAColor>,
        stroke: Option<(RGBAColor, u32)>,
    ) -> Result<(), StudyError> {
        let corners = [(px(rect.x0), px(rect.y0)), (px(rect.x1), px(rect.y1))];
        if let Some(fill) = fill {
            self.area
                .draw(&Rectangle::new(corners, fill.filled()))
                .map_err(drawing)?;
        }
        if let Some((colour, width)) = stroke {
            self.area
                .draw(&Rectangle::new(corners, colour.stroke_width(width)))
                .map_err(drawing)?;
        }
        Ok(())
    }

    /// A filled polygon, optionally outlined.
    pub fn polygon(
        &mut self,
        points: &[(f64, f64)],
        fill: RGBAColor,
        stroke: Option<(RGBAColor, u32)>,
    ) -> Result<(), StudyError> {
        let pts: Vec<(i32, i32)> = points.iter().map(|&(x, y)| (px(x), px(y))).collect();
        self.area
            .draw(&Polygon::new(pts.clone(), fill.filled()))
            .map_err(drawing)?;
        if let Some((colour, width)) = stroke {
            let mut closed = pts;
            if let Some(&first) = closed.first() {
                closed.push(first);
            }
            self.area
                .draw(&PathElement::new(closed, colour.stroke_width(width)))
                .map_err(drawing)?;
        }
        Ok(())
    }

    /// A circle of `radius` pixels.
    pub fn circle(
        &mut self,
        (x, y): (f64, f64),
        radius: u32,
        fill: Option<RGBAColor>,
        stroke: Option<(RGBAColor, u32)>,
    ) -> Result<(), StudyError> {
        if let Some(fill) = fill {
            self.area
                .draw(&Circle::new((px(x), px(y)), radius, fill.filled()))
                .map_err(drawing)?;
        }
        if let Some((colour, width)) = stroke {
            self.area
                .draw(&Circle::new(
                    (px(x), px(y)),
                    radius,
                    colour.stroke_width(width),
                ))
                .map_err(drawing)?;
        }
        Ok(())
    }
}
