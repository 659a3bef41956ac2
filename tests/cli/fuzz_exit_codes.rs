//! A sample of the fuzzing harness's cases (tests/common/fuzz.rs) run through the binary:
//! whatever the input, `jointplan` exits 0, 1 or 2, never panics, and a failure says why on
//! standard error. `JOINTPLAN_FUZZ_CASES` scales the sample as it scales the library run.

use std::path::Path;
use std::process::Command;

use crate::common::fuzz::{cases, mutate, seed, Rng};

fn check(args: &[&str], label: &str) {
    let out = Command::new(env!("CARGO_BIN_EXE_jointplan"))
        .args(args)
        .output()
        .expect("the jointplan binary runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let code = out.status.code();
    assert!(
        matches!(code, Some(0..=2)),
        "{label}: exit {code:?}: {stderr}"
    );
    assert!(!stderr.contains("panicked"), "{label}: {stderr}");
    if code != Some(0) {
        assert!(
            stderr.starts_with("jointplan"),
            "{label}: the error line names the command: {stderr}"
        );
    }
}

#[test]
fn mutated_inputs_exit_0_1_or_2_through_the_binary() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let request: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(root.join("models/tiny/request.json")).unwrap(),
    )
    .unwrap();
    let problem: serde_json::Value =
        serde_json::from_str(include_str!("../data/spec-example.json")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("case.json");
    let seed = seed();
    let sample = cases(700) / 20;
    for index in 0..sample {
        let mut rng = Rng::for_case(seed ^ 0xC1, index);
        let as_request = index % 2 == 0;
        let case = mutate(if as_request { &request } else { &problem }, &mut rng);
        std::fs::write(&file, &case.text).unwrap();
        let label = format!("seed {seed} case {index} {:?}", case.mutations);
        let file = file.display().to_string();
        if as_request {
            check(&["plan", &file], &label);
        } else {
            check(&["solve", &file], &label);
        }
    }
}
