//! Colours, markers and dash patterns: colour-blind-safe palettes (Okabe and Ito's for
//! lines, Paul Tol's "light" scheme for filled regions, which keeps black text legible),
//! and per-series styles that keep equal lines visible (the first drawn widest and
//! lightest, later ones thinner, dashed, with other markers).

use plotters::style::{RGBAColor, RGBColor};

fn hex(code: u32) -> RGBColor {
    RGBColor((code >> 16) as u8, (code >> 8) as u8, code as u8)
}

/// Line colours (Okabe and Ito, then Tol's muted), distinct for up to ten lines.
const LINES: [u32; 10] = [
    0x0072B2, 0xD55E00, 0x009E73, 0xCC79A7, 0xE69F00, 0x56B4E9, 0x000000, 0x999933, 0x882255,
    0x44AA99,
];

/// Region fills (Tol's light scheme without its grey, which marks "no plan").
const FILLS: [u32; 8] = [
    0x77AADD, 0xEE8866, 0xEEDD88, 0xFFAABB, 0x99DDFF, 0x44BB99, 0xBBCC33, 0xAAAA00,
];

/// The line colour of series `index` (repeats after ten; the style still differs).
pub fn line_colour(index: usize) -> RGBAColor {
    let c = hex(LINES[index % LINES.len()]);
    RGBAColor(c.0, c.1, c.2, 1.0)
}

/// The fill of region `index` (repeats after eight; the letter still differs).
pub fn fill_colour(index: usize) -> RGBAColor {
    let c = hex(FILLS[index % FILLS.len()]);
    RGBAColor(c.0, c.1, c.2, 1.0)
}

/// Cells without a plan.
pub const NO_PLAN: RGBAColor = RGBAColor(221, 221, 221, 1.0);
/// Axes, text and marks.
pub const INK: RGBAColor = RGBAColor(0, 0, 0, 1.0);
/// Grid lines.
pub const GRID: RGBAColor = RGBAColor(225, 225, 225, 1.0);
/// Marks that belong to no one series.
pub const NEUTRAL: RGBAColor = RGBAColor(90, 90, 90, 1.0);

/// A marker shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Marker {
    /// A circle.
    Circle,
    /// A triangle pointing up.
    Triangle,
    /// A square.
    Square,
    /// A diamond.
    Diamond,
    /// A triangle pointing down.
    TriangleDown,
}

/// The marker, dash pattern and stroke width of style `index` of `count` styles: the
/// first is solid and widest (drawn first, under the others), each next one thinner and
/// dashed, so that lines with equal values stay visible.
pub fn series_style(index: usize, count: usize) -> (Marker, Option<(u32, u32)>, u32) {
    const MARKERS: [Marker; 5] = [
        Marker::Circle,
        Marker::Triangle,
        Marker::Square,
        Marker::Diamond,
        Marker::TriangleDown,
    ];
    const DASHES: [Option<(u32, u32)>; 5] = [
        None,
        Some((7, 4)),
        Some((2, 3)),
        Some((12, 4)),
        Some((4, 2)),
    ];
    let rank = count.saturating_sub(1).saturating_sub(index).min(2) as u32;
    (
        MARKERS[index % MARKERS.len()],
        DASHES[index % DASHES.len()],
        2 + 2 * rank,
    )
}

/// The region letter of choice `index`: A..Z, then AA, AB, ...
pub fn letter(index: usize) -> String {
    let mut n = index;
    let mut text = String::new();
    loop {
        text.insert(0, (b'A' + (n % 26) as u8) as char);
        if n < 26 {
            break;
        }
        n = n / 26 - 1;
    }
    text
}

/// The vertices of `marker` of radius `r` at `(x, y)` (`None` for a circle).
pub fn marker_polygon(marker: Marker, (x, y): (f64, f64), r: f64) -> Option<Vec<(f64, f64)>> {
    Some(match marker {
        Marker::Circle => return None,
        Marker::Triangle => vec![
            (x, y - r * 1.15),
            (x + r, y + r * 0.7),
            (x - r, y + r * 0.7),
        ],
        Marker::TriangleDown => {
            vec![
                (x, y + r * 1.15),
                (x + r, y - r * 0.7),
                (x - r, y - r * 0.7),
            ]
        }
        Marker::Square => {
            let s = r * 0.85;
            vec![
                (x - s, y - s),
                (x + s, y - s),
                (x + s, y + s),
                (x - s, y + s),
            ]
        }
        Marker::Diamond => vec![(x, y - r * 1.2), (x + r, y), (x, y + r * 1.2), (x - r, y)],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn letters_never_repeat() {
        let letters: Vec<String> = (0..800).map(letter).collect();
        let mut unique = letters.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), letters.len());
        assert_eq!(letters[0], "A");
        assert_eq!(letters[25], "Z");
        assert_eq!(letters[26], "AA");
    }

    #[test]
    fn styles_differ_and_the_first_is_widest() {
        let styles: Vec<_> = (0..5).map(|i| series_style(i, 5)).collect();
        for (i, a) in styles.iter().enumerate() {
            for b in &styles[i + 1..] {
                assert_ne!((a.0, a.1), (b.0, b.1));
                assert!(a.2 >= b.2);
            }
        }
    }
}
