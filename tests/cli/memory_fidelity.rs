//! The memory figures `jointplan plan` prints agree with the library's memory report: the
//! line saying the pools share a capacity names the report's dynamic capacity (usable −
//! static) and its sum of pool maxima, by the same rule.

use std::path::Path;

use jointplan::memory::memory_report;
use jointplan::plan::ExecutionPlan;

use crate::process::{jointplan, ok, s, text};

fn folder(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("models")
        .join(name)
        .display()
        .to_string()
}

/// The first number after `marker` in `line`.
fn number_after(line: &str, marker: &str) -> u64 {
    let start = line
        .find(marker)
        .unwrap_or_else(|| panic!("{marker} in {line}"))
        + marker.len();
    line[start..]
        .trim_start()
        .split(|c: char| !c.is_ascii_digit())
        .next()
        .and_then(|digits| digits.parse().ok())
        .unwrap_or_else(|| panic!("a number after {marker} in {line}"))
}

#[test]
fn the_pools_share_line_names_the_reports_dynamic_capacity() {
    let dir = tempfile::tempdir().unwrap();
    let plan_path = dir.path().join("plan.json");
    let result = jointplan(&["plan", &folder("llama-3.1-8b"), "-o", &s(&plan_path)]);
    ok(&result);
    let stdout = text(&result.stdout);
    let line = stdout
        .lines()
        .find(|l| l.contains("the pools share"))
        .unwrap_or_else(|| panic!("no pools-share line:\n{stdout}"));
    let plan: ExecutionPlan = serde_json::from_slice(&std::fs::read(&plan_path).unwrap()).unwrap();
    let report = memory_report(&plan.payload.memory);
    assert!(report.pools_share_dynamic_capacity, "{report:?}");
    assert_eq!(
        report.dynamic_capacity_bytes,
        report.usable_capacity_bytes - report.static_bytes
    );
    assert!(line.contains("dynamic capacity"), "{line}");
    assert!(line.contains("docs/rules.md 4.5"), "{line}");
    assert_eq!(
        number_after(line, "usable - static ="),
        report.dynamic_capacity_bytes,
        "{line}"
    );
    assert_eq!(
        number_after(line, "they would take"),
        report.pool_maxima_sum_bytes,
        "{line}"
    );
}
