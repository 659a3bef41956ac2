//! The `engine` knob of a sweep, in the library: a grid without it keeps the keys its
//! points had before the knob existed (existing results directories resume and merge as
//! they did), and a bad engine value is refused before any point is planned, naming the
//! grid key and the value.

use std::path::PathBuf;

use jointplan::study::sweep::{prepare_point_in, Grid};
use jointplan::BuildOptions;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The keys of these points, computed by the code before the `engine` knob was added
/// (relative paths, read from the repository root): a plain point, a serving point, a
/// device-set point and an error row.
#[test]
fn a_grid_without_engine_keeps_its_point_keys() {
    let grids = [
        (
            serde_json::json!({"model": ["models/llama-3.2-1b"], "layers": [2]}),
            "3c7d70e8a40b4699ca47308c88336dd8f9e9e93b344c62668b8704fb2216f824",
        ),
        (
            serde_json::json!({
                "model": ["models/llama-3.2-1b"],
                "device": ["models/devices/h100-sxm-80gb.json"],
                "layers": [2],
                "concurrency": [2],
                "input_tokens": [64],
                "output_tokens": [8],
            }),
            "1e46c881a75bec4d3f6c745dcb24b3318b558354dad4e8b0a96a1e81e8e55e47",
        ),
        (
            serde_json::json!({
                "model": ["models/llama-3.1-8b"],
                "devices": ["models/devices/sets/a100-80gb-x2.json"],
                "layers": [2],
                "tensor_parallel": [2],
            }),
            "f0f1bf8802ff320d6fcf5468ff7bab4774bbcf303d25e245cfc0bcbfafefc381",
        ),
    ];
    let options = BuildOptions::default();
    let mut keys = Vec::new();
    let mut wanted = Vec::new();
    for (grid, expected) in grids {
        let grid: Grid = serde_json::from_value(grid).unwrap();
        let points = grid.points().unwrap();
        assert_eq!(points.len(), 1);
        let prepared = prepare_point_in(&points[0], Some(&root()), &options).unwrap();
        keys.push(prepared.key().to_owned());
        wanted.push(expected);
    }
    assert_eq!(keys, wanted);
}
