//! `--backend microlp|highs` on `solve` and `plan`: the default backend's
//! output does not change when it is named, a build without the `highs`
//! feature refuses `highs` with exit 2 and says how to build it, and a build
//! with it gives the same answer as microlp.

use std::process::{Command, Output};

fn jointplan(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_jointplan"))
        .args(args)
        .output()
        .expect("the binary runs")
}

const SPEC: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/spec-example.json");
const TINY: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/models/tiny/request.json");

/// A generated long-range instance (the integer program has work to do).
fn generated(dir: &tempfile::TempDir) -> String {
    let path = dir.path().join("long-range.json");
    let path = path.to_string_lossy().into_owned();
    let out = jointplan(&["solve", &path, "--generate", "long-range:120"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    path
}

#[test]
fn naming_the_default_backend_changes_no_byte() {
    let dir = tempfile::tempdir().unwrap();
    for problem in [SPEC.to_string(), generated(&dir)] {
        let default = jointplan(&["solve", &problem, "--no-timings"]);
        let named = jointplan(&["solve", &problem, "--no-timings", "--backend", "microlp"]);
        assert_eq!(default.status.code(), Some(0));
        assert_eq!(default.stdout, named.stdout, "{problem}");
        assert_eq!(named.status.code(), Some(0));
    }
    let default = jointplan(&["plan", TINY, "--json"]);
    let named = jointplan(&["plan", TINY, "--json", "--backend", "microlp"]);
    assert_eq!(default.status.code(), Some(0));
    assert_eq!(named.status.code(), Some(0));
    assert_eq!(default.stdout, named.stdout);
}

#[test]
fn an_unknown_backend_is_a_usage_error() {
    for args in [
        vec!["solve", SPEC, "--backend", "cplex"],
        vec!["plan", TINY, "--backend", "cplex"],
    ] {
        let out = jointplan(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("cplex"), "{err}");
        assert!(out.stdout.is_empty());
    }
}

/// The default build names the feature and the build command, exit 2.
#[cfg(not(feature = "highs"))]
#[test]
fn the_default_build_rejects_highs_and_says_how_to_build_it() {
    for (command, args) in [
        ("solve", vec!["solve", SPEC, "--backend", "highs"]),
        ("plan", vec!["plan", TINY, "--backend", "highs"]),
    ] {
        let out = jointplan(&args);
        assert_eq!(out.status.code(), Some(2), "{command}");
        assert!(out.stdout.is_empty(), "{command}: nothing on stdout");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.lines().count(), 1, "{command}: one message: {err}");
        assert!(
            err.starts_with(&format!("jointplan {command}: --backend highs:")),
            "{err}"
        );
        assert!(err.contains("cargo feature `highs`"), "{err}");
        assert!(
            err.contains("cargo build --release --features highs"),
            "{err}"
        );
    }
}

/// With the feature, HiGHS gives microlp's output byte for byte (the
/// output names no backend, and `--no-timings` zeroes every time).
#[cfg(feature = "highs")]
#[test]
fn highs_gives_the_same_output_as_microlp() {
    let dir = tempfile::tempdir().unwrap();
    for problem in [SPEC.to_string(), generated(&dir)] {
        let micro = jointplan(&["solve", &problem, "--no-timings"]);
        let highs = jointplan(&["solve", &problem, "--no-timings", "--backend", "highs"]);
        assert_eq!(
            highs.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&highs.stderr)
        );
        assert_eq!(micro.stdout, highs.stdout, "{problem}");
    }
    let micro = jointplan(&["plan", TINY, "--json"]);
    let highs = jointplan(&["plan", TINY, "--json", "--backend", "highs"]);
    assert_eq!(highs.status.code(), Some(0));
    assert_eq!(micro.stdout, highs.stdout);
}
