//! Axes of the plots: linear or log2 scales, where their ticks go and how they read.
//!
//! A doubling grid (every value a power-of-two multiple of the smallest, as contexts of
//! 2048 .. 131072 tokens are) is drawn on a log2 axis with a tick at each grid value;
//! other grids on a linear axis. Tick labels are short and exact: counts as `8192`, `32k`
//! (32768), `128k`, `100k` (100000), `2M`; bytes in binary units (`256 MiB`, `16 GiB`);
//! never a float such as `500000.0`.

/// What the values of an axis count.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unit {
    /// Tokens, sequences, layers: plain counts.
    Count,
    /// Bytes, labelled in binary units.
    Bytes,
}

/// A scale from values to a pixel span.
#[derive(Clone, Debug, PartialEq)]
pub struct Scale {
    /// Whether positions follow log2 of the value.
    pub log2: bool,
    /// The smallest value shown.
    pub low: f64,
    /// The largest value shown.
    pub high: f64,
    /// The ticks (values) with their labels.
    pub ticks: Vec<(f64, String)>,
}

/// Whether `values` (positive, at least three distinct) are each a power-of-two multiple
/// of the smallest, spanning at least a factor of four: a doubling grid.
pub fn is_doubling(values: &[f64]) -> bool {
    let mut distinct: Vec<f64> = values.to_vec();
    distinct.sort_by(f64::total_cmp);
    distinct.dedup();
    let Some(&first) = distinct.first() else {
        return false;
    };
    if distinct.len() < 3 || first <= 0.0 {
        return false;
    }
    let power_of_two = |v: f64| {
        let ratio = v / first;
        let exponent = ratio.log2().round();
        (ratio - exponent.exp2()).abs() <= 1e-9 * ratio
    };
    distinct.iter().all(|&v| power_of_two(v)) && distinct[distinct.len() - 1] / first >= 4.0
}

/// A count as a short exact label: below 10000 as it is (`8192`); multiples of a million
/// as `2M`, of 2^20 as `1M`; multiples of a thousand as `100k`, of 1024 as `32k`;
/// anything else with thin grouping (`53,250`).
pub fn count_label(value: f64) -> String {
    if value.fract() != 0.0 || value.abs() >= 1e18 {
        return trim_float(value);
    }
    let v = value as i64;
    let a = v.unsigned_abs();
    let sign = if v < 0 { "-" } else { "" };
    if a < 10_000 {
        return v.to_string();
    }
    if a >= 1_000_000 && a % 100_000 == 0 {
        return format!("{sign}{}M", trim_float(a as f64 / 1e6));
    }
    for (unit, name) in [
        (1_000_000u64, "M"),
        (1 << 20, "M"),
        (1_000, "k"),
        (1 << 10, "k"),
    ] {
        if a % unit == 0 {
            return format!("{sign}{}{name}", a / unit);
        }
    }
    let digits = a.to_string();
    let mut grouped = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            grouped.push(',');
        }
        grouped.push(c);
    }
    format!("{sign}{grouped}")
}

fn trim_float(value: f64) -> String {
    let text = format!("{value:.3}");
    text.trim_end_matches('0').trim_end_matches('.').to_owned()
}

/// Bytes in binary units with at most three significant decimals (`256 MiB`, `1.5 GiB`).
pub fn bytes_label(value: f64) -> String {
    let units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut scaled = value;
    let mut unit = 0;
    while scaled.abs() >= 1024.0 && unit + 1 < units.len() {
        scaled /= 1024.0;
        unit += 1;
    }
    format!("{} {}", trim_float(scaled), units[unit])
}

/// The label of `value` in `unit`.
pub fn label(value: f64, unit: Unit) -> String {
    match unit {
        Unit::Count => count_label(value),
        Unit::Bytes => bytes_label(value),
    }
}

/// A "nice" step (1, 2 or 5 times a power of ten; for bytes a power-of-two multiple of a
/// binary unit) giving about `target` intervals over `span`.
fn nice_step(span: f64, target: f64, unit: Unit) -> f64 {
    let raw = (span / target).max(f64::MIN_POSITIVE);
    match unit {
        Unit::Count => {
            let power = 10f64.powf(raw.log10().floor());
            let mantissa = raw / power;
            let nice = if mantissa <= 1.0 {
                1.0
            } else if mantissa <= 2.0 {
                2.0
            } else if mantissa <= 5.0 {
                5.0
            } else {
                10.0
            };
            nice * power
        }
        Unit::Bytes => raw.log2().ceil().exp2(),
    }
}

impl Scale {
    /// A linear scale over `values` (including `0` when `from_zero`), with nice ticks.
    pub fn linear(values: &[f64], from_zero: bool, unit: Unit) -> Scale {
        let mut low = values.iter().copied().fold(f64::INFINITY, f64::min);
        let mut high = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        if !low.is_finite() || !high.is_finite() {
            (low, high) = (0.0, 1.0);
        }
        if from_zero {
            low = low.min(0.0);
            high = high.max(0.0);
        }
        if high <= low {
            high = low + low.abs().max(1.0);
        }
        let step = nice_step(high - low, 5.0, unit);
        let low = (low / step).floor() * step;
        let high = (high / step).ceil() * step;
        let mut ticks = Vec::new();
        let mut k = (low / step).round() as i64;
        while (k as f64) * step <= high + step * 1e-9 {
            let v = k as f64 * step;
            ticks.push((v, label(v, unit)));
            k += 1;
        }
        Scale {
            log2: false,
            low,
            high,
            ticks,
        }
    }

    /// A linear scale with a tick at each of a few grid values (layers, sequences).
    pub fn grid(values: &[f64], unit: Unit) -> Scale {
        let mut distinct = values.to_vec();
        distinct.sort_by(f64::total_cmp);
        distinct.dedup();
        if distinct.len() > 12 || distinct.len() < 2 {
            return Scale::linear(values, false, unit);
        }
        let (low, high) = (distinct[0], distinct[distinct.len() - 1]);
        let pad = (high - low) * 0.04;
        Scale {
            log2: false,
            low: low - pad,
            high: high + pad,
            ticks: distinct.iter().map(|&v| (v, label(v, unit))).collect(),
        }
    }

    /// A log2 scale for a doubling grid: a tick at each grid value, a quarter octave of
    /// space at each end.
    pub fn doubling(values: &[f64], unit: Unit) -> Scale {
        let mut distinct = values.to_vec();
        distinct.sort_by(f64::total_cmp);
        distinct.dedup();
        let (low, high) = (distinct[0], distinct[distinct.len() - 1]);
        Scale {
            log2: true,
            low: low * 0.25f64.exp2().recip(),
            high: high * 0.25f64.exp2(),
            ticks: distinct.iter().map(|&v| (v, label(v, unit))).collect(),
        }
    }

    /// A log2 scale over positive `values` with ticks at powers of two (every octave, or
    /// every second or fourth when the span is wide).
    pub fn log2_span(values: &[f64], unit: Unit) -> Scale {
        let positive: Vec<f64> = values.iter().copied().filter(|v| *v > 0.0).collect();
        let low = positive.iter().copied().fold(f64::INFINITY, f64::min);
        let high = positive.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        if !low.is_finite() {
            return Scale::linear(values, true, unit);
        }
        let first = low.log2().floor() as i32;
        let last = (high.log2().ceil() as i32).max(first + 1);
        let octaves = last - first;
        let every = if octaves <= 8 {
            1
        } else if octaves <= 16 {
            2
        } else {
            4
        };
        let first = first.div_euclid(every) * every;
        let last = (last + every - 1).div_euclid(every) * every;
        let ticks = (first..=last)
            .step_by(every as usize)
            .map(|e| {
                let v = f64::from(e).exp2();
                (v, label(v, unit))
            })
            .collect();
        Scale {
            log2: true,
            low: f64::from(first).exp2(),
            high: f64::from(last).exp2(),
            ticks,
        }
    }

    /// A logarithmic scale over positive `values` with ticks at 1, 2 and 5 times the
    /// powers of ten between them (only the powers of ten when that makes more than 12
    /// ticks): tokens per second read as `1`, `20`, `500`, `2000`, `50k`.
    pub fn log_decades(values: &[f64], unit: Unit) -> Scale {
        let positive: Vec<f64> = values.iter().copied().filter(|v| *v > 0.0).collect();
        let low = positive.iter().copied().fold(f64::INFINITY, f64::min);
        let high = positive.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        if !low.is_finite() {
            return Scale::linear(values, true, unit);
        }
        let nice = |decade: i32, m: f64| m * 10f64.powi(decade);
        let steps = |every: &[f64]| -> Vec<f64> {
            let first = low.log10().floor() as i32;
            let last = high.log10().ceil() as i32;
            let mut all: Vec<f64> = (first..=last)
                .flat_map(|d| every.iter().map(move |m| nice(d, *m)))
                .collect();
            // The nice values around the data: the last at or below `low` to the first at
            // or above `high`.
            let start = all
                .iter()
                .rposition(|v| *v <= low * (1.0 + 1e-12))
                .unwrap_or(0);
            let end = all
                .iter()
                .position(|v| *v >= high * (1.0 - 1e-12))
                .unwrap_or(all.len() - 1);
            all.truncate(end + 1);
            all.drain(..start);
            all
        };
        let mut ticks = steps(&[1.0, 2.0, 5.0]);
        if ticks.len() > 12 {
            ticks = steps(&[1.0]);
        }
        if ticks.len() < 2 {
            ticks = vec![low, high.max(low * 2.0)];
        }
        let (low, high) = (ticks[0], ticks[ticks.len() - 1]);
        Scale {
            log2: true,
            low,
            high,
            ticks: ticks.iter().map(|&v| (v, label(v, unit))).collect(),
        }
    }

    /// The axis for the grid values of a knob: log2 for a doubling grid, else linear.
    pub fn for_knob(values: &[f64]) -> Scale {
        if is_doubling(values) {
            Scale::doubling(values, Unit::Count)
        } else {
            Scale::grid(values, Unit::Count)
        }
    }

    /// Where `value` falls between `low` (0) and `high` (1); `None` off a log scale's
    /// domain (zero or negative).
    pub fn fraction(&self, value: f64) -> Option<f64> {
        if self.log2 {
            if value <= 0.0 {
                return None;
            }
            Some((value.log2() - self.low.log2()) / (self.high.log2() - self.low.log2()))
        } else {
            Some((value - self.low) / (self.high - self.low))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_read_as_people_write_them() {
        let cases = [
            (0.0, "0"),
            (2048.0, "2048"),
            (8192.0, "8192"),
            (32768.0, "32k"),
            (131072.0, "128k"),
            (100000.0, "100k"),
            (500000.0, "500k"),
            (2_000_000.0, "2M"),
            (1_500_000.0, "1.5M"),
            (1_048_576.0, "1M"),
            (53250.0, "53,250"),
            (1.5, "1.5"),
        ];
        for (value, text) in cases {
            assert_eq!(count_label(value), text, "{value}");
        }
    }

    #[test]
    fn bytes_read_in_binary_units() {
        assert_eq!(bytes_label(16.0 * 1024.0 * 1024.0 * 1024.0), "16 GiB");
        assert_eq!(bytes_label(256.0 * 1024.0 * 1024.0), "256 MiB");
        assert_eq!(bytes_label(1.5 * 1024.0 * 1024.0 * 1024.0), "1.5 GiB");
        assert_eq!(bytes_label(512.0), "512 B");
    }

    #[test]
    fn doubling_grids_are_detected() {
        assert!(is_doubling(&[2048.0, 8192.0, 32768.0, 65536.0, 131072.0]));
        assert!(is_doubling(&[4096.0, 16384.0, 65536.0, 131072.0]));
        assert!(!is_doubling(&[1.0, 2.0, 3.0, 4.0]));
        assert!(!is_doubling(&[1024.0, 2048.0]), "two values are no grid");
        assert!(!is_doubling(&[1000.0, 2000.0, 3000.0]));
        assert!(!is_doubling(&[0.0, 2.0, 4.0]));
    }

    #[test]
    fn linear_ticks_are_round_and_never_floats() {
        let scale = Scale::linear(&[53248.0, 489163.0], true, Unit::Count);
        assert_eq!(scale.low, 0.0);
        assert!(scale.high >= 489163.0);
        for (_, label) in &scale.ticks {
            assert!(!label.contains('.'), "{label}");
        }
        assert_eq!(scale.ticks[1].1, "100k");
    }

    #[test]
    fn decades_tick_at_one_two_five() {
        let scale = Scale::log_decades(&[3.2, 740.0], Unit::Count);
        let labels: Vec<&str> = scale.ticks.iter().map(|t| t.1.as_str()).collect();
        assert_eq!(
            labels,
            ["2", "5", "10", "20", "50", "100", "200", "500", "1000"]
        );
        let wide = Scale::log_decades(&[0.5, 2.0e6], Unit::Count);
        let labels: Vec<&str> = wide.ticks.iter().map(|t| t.1.as_str()).collect();
        assert_eq!(
            labels,
            ["0.1", "1", "10", "100", "1000", "10k", "100k", "1M", "10M"]
        );
    }

    #[test]
    fn byte_octaves_tick_at_powers_of_two() {
        let gib = 1024.0 * 1024.0 * 1024.0;
        let scale = Scale::log2_span(&[0.25 * gib, 60.0 * gib], Unit::Bytes);
        let labels: Vec<&str> = scale.ticks.iter().map(|t| t.1.as_str()).collect();
        assert_eq!(labels.first(), Some(&"256 MiB"));
        assert_eq!(labels.last(), Some(&"64 GiB"));
        assert!(labels.contains(&"16 GiB"), "{labels:?}");
    }
}
