//! Calibration files: measured kernel times that replace the roofline's prediction.
//!
//! Format (JSON; `docs/performance-model.md#calibration`):
//!
//! ```json
//! {"entries": [
//!   {"operation": "dense_linear", "device": "NVIDIA H100 80GB HBM3", "dtype": "bf16",
//!    "weight_dimensions": [4096, 4096], "tokens": 1, "seconds": 0.0000121}
//! ]}
//! ```
//!
//! An entry matches a node when its `operation` is the node's operation id or that id's
//! last part, its `device` is the device's name, its `dtype` is the node's arithmetic type
//! and, if given, its `weight_dimensions` are the logical dimensions of the node's first
//! matrix weight. The node's time at `rows` rows (tokens, or sequences for a last-token
//! node) is interpolated linearly between the two matching entries whose token counts
//! bracket it; below the smallest it is the smallest entry's time (small steps are bound by
//! weights and launches, not by rows); above the largest it grows in proportion to the rows
//! (`t_max x rows / tokens_max`, the compute-bound limit).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::profile::NodeCost;
use super::PerfError;

/// One measured time.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CalibrationEntry {
    /// The operation id, or its last part (`dense_linear`).
    pub operation: String,
    /// The device name, as in the device file's `name`.
    pub device: String,
    /// The arithmetic type: fp32, bf16, fp8, int8 or fp4.
    pub dtype: String,
    /// The logical dimensions of the node's first matrix weight; any node of the operation
    /// when absent.
    #[serde(default)]
    pub weight_dimensions: Option<Vec<u64>>,
    /// Tokens (rows) of the measured invocation (> 0).
    pub tokens: u64,
    /// Measured seconds of one invocation (> 0).
    pub seconds: f64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CalibrationFile {
    entries: Vec<CalibrationEntry>,
}

/// What a group of calibration entries matches: operation, device, dtype and optional
/// weight dimensions.
type GroupKey = (String, String, String, Option<Vec<u64>>);

/// Measured kernel times, grouped by what they match.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Calibration {
    /// The file they came from (for messages).
    pub file: Option<PathBuf>,
    /// (operation, device, dtype, weight dimensions) -> (tokens, seconds), sorted by tokens.
    groups: BTreeMap<GroupKey, Vec<(u64, f64)>>,
}

const DTYPES: &[&str] = &["fp32", "bf16", "fp8", "int8", "fp4"];

impl Calibration {
    /// Reads and checks a calibration file; every error names the file and the JSON path.
    pub fn read(file: &Path) -> Result<Self, PerfError> {
        let parsed: CalibrationFile =
            crate::request::read_json(file).map_err(|e| PerfError::CalibrationLoad(Box::new(e)))?;
        Self::from_entries(file, parsed.entries)
    }

    /// Checks `entries` (from `file`) and groups them.
    pub fn from_entries(file: &Path, entries: Vec<CalibrationEntry>) -> Result<Self, PerfError> {
        let bad = |index: usize, key: &str, message: String| PerfError::Calibration {
            file: file.to_path_buf(),
            json_path: format!(".entries[{index}].{key}"),
            message,
        };
        let mut groups: BTreeMap<_, Vec<(u64, f64)>> = BTreeMap::new();
        for (index, entry) in entries.into_iter().enumerate() {
            if entry.operation.trim().is_empty() {
                return Err(bad(index, "operation", "is empty".to_owned()));
            }
            if !DTYPES.contains(&entry.dtype.as_str()) {
                return Err(bad(
                    index,
                    "dtype",
                    format!("{:?} is not one of {}", entry.dtype, DTYPES.join(", ")),
                ));
            }
            if entry.tokens == 0 {
                return Err(bad(index, "tokens", "must be positive".to_owned()));
            }
            if !(entry.seconds.is_finite() && entry.seconds > 0.0) {
                return Err(bad(
                    index,
                    "seconds",
                    format!("{} is not a positive number of seconds", entry.seconds),
                ));
            }
            let operation = entry
                .operation
                .strip_prefix("operation.")
                .unwrap_or(&entry.operation)
                .to_owned();
            let key = (
                operation,
                entry.device,
                entry.dtype,
                entry.weight_dimensions,
            );
            let points = groups.entry(key).or_default();
            if points.iter().any(|&(t, _)| t == entry.tokens) {
                return Err(bad(
                    index,
                    "tokens",
                    format!(
                        "{} is measured twice for the same operation, device, dtype and shape",
                        entry.tokens
                    ),
                ));
            }
            points.push((entry.tokens, entry.seconds));
        }
        for points in groups.values_mut() {
            points.sort_by_key(|&(t, _)| t);
        }
        Ok(Calibration {
            file: Some(file.to_path_buf()),
            groups,
        })
    }

    /// Whether it holds no entry.
    pub fn is_empty(&self) -> bool {
        self.groups.is_empty()
    }

    /// The measured time of a node costing `p` at `rows` rows on `device`, if an
    /// entry matches (a shape-specific entry before an operation-wide one).
    pub fn seconds(&self, p: &NodeCost, device: &str, dtype: &str, rows: f64) -> Option<f64> {
        if self.groups.is_empty() {
            return None;
        }
        let key =
            |dims: Option<Vec<u64>>| (p.kind.clone(), device.to_owned(), dtype.to_owned(), dims);
        let points = p
            .matrix_dimensions
            .clone()
            .and_then(|dims| self.groups.get(&key(Some(dims))))
            .or_else(|| self.groups.get(&key(None)))?;
        Some(interpolate(points, rows))
    }
}

/// The stated interpolation over `(tokens, seconds)` points sorted by tokens.
pub fn interpolate(points: &[(u64, f64)], rows: f64) -> f64 {
    let Some(&(first_t, first_s)) = points.first() else {
        return 0.0;
    };
    if rows <= first_t as f64 {
        return first_s;
    }
    for pair in points.windows(2) {
        let (t0, s0) = (pair[0].0 as f64, pair[0].1);
        let (t1, s1) = (pair[1].0 as f64, pair[1].1);
        if rows <= t1 {
            return s0 + (s1 - s0) * (rows - t0) / (t1 - t0);
        }
    }
    let &(last_t, last_s) = points.last().unwrap_or(&(first_t, first_s));
    last_s * rows / last_t as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interpolation_is_the_stated_rule() {
        let points = [(1, 1.0), (10, 2.0), (100, 5.0)];
        assert_eq!(interpolate(&points, 0.5), 1.0);
        assert_eq!(interpolate(&points, 1.0), 1.0);
        assert!((interpolate(&points, 5.5) - 1.5).abs() < 1e-12);
        assert_eq!(interpolate(&points, 100.0), 5.0);
        assert_eq!(interpolate(&points, 200.0), 10.0);
    }

    #[test]
    fn a_bad_entry_names_its_json_path() {
        let entry = CalibrationEntry {
            operation: "dense_linear".to_owned(),
            device: "d".to_owned(),
            dtype: "bf16".to_owned(),
            weight_dimensions: None,
            tokens: 1,
            seconds: -1.0,
        };
        let err = Calibration::from_entries(Path::new("c.json"), vec![entry.clone()]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "c.json: at .entries[0].seconds: -1 is not a positive number of seconds"
        );
        let twice = vec![
            CalibrationEntry {
                seconds: 1.0,
                ..entry.clone()
            },
            CalibrationEntry {
                seconds: 2.0,
                ..entry.clone()
            },
        ];
        let err = Calibration::from_entries(Path::new("c.json"), twice).unwrap_err();
        assert!(err.to_string().contains(".entries[1].tokens"), "{err}");
        let wrong = CalibrationEntry {
            dtype: "f16".to_owned(),
            seconds: 1.0,
            ..entry
        };
        let err = Calibration::from_entries(Path::new("c.json"), vec![wrong]).unwrap_err();
        assert!(err.to_string().contains(".entries[0].dtype"), "{err}");
    }
}
