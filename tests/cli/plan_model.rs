//! `jointplan plan MODEL_FOLDER`: a model folder is synthesized in memory exactly as
//! `jointplan synth --model` writes it, with the same override flags, then planned; errors
//! name the folder. Also the selection flags of `plan` (`--node-limit`, `--time-limit`,
//! `--dp-state-budget`, `--allow-uncertified`).

use jointplan::candidates::CandidateError;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::process::{jointplan, ok, ok_json, s, text};

fn models() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("models")
}

fn folder(name: &str) -> String {
    models().join(name).display().to_string()
}

#[test]
fn a_model_folder_plans_like_its_synthesized_request() {
    let dir = tempfile::tempdir().unwrap();
    let direct = dir.path().join("direct.plan.json");
    let result = jointplan(&[
        "plan",
        &folder("llama-3.2-1b"),
        "--layers",
        "2",
        "-o",
        &s(&direct),
    ]);
    ok(&result);
    let stdout = text(&result.stdout);
    assert!(
        stdout.contains("family family.llama-3.2-1b on device"),
        "{stdout}"
    );
    assert!(stdout.contains("static bytes"), "{stdout}");

    let request = dir.path().join("request.json");
    ok(&jointplan(&[
        "synth",
        "--model",
        &folder("llama-3.2-1b"),
        "--layers",
        "2",
        "-o",
        &s(&request),
    ]));
    let via_file = dir.path().join("via-file.plan.json");
    ok(&jointplan(&["plan", &s(&request), "-o", &s(&via_file)]));
    assert_eq!(
        std::fs::read(&direct).unwrap(),
        std::fs::read(&via_file).unwrap(),
        "plan FOLDER and plan (synth FOLDER) write the same plan"
    );
    ok(&jointplan(&["verify", &s(&request), &s(&direct)]));

    // Two layers: fewer nodes than the full model.
    let plan: Value = serde_json::from_slice(&std::fs::read(&direct).unwrap()).unwrap();
    let nodes = plan["payload"]["nodes"].as_array().unwrap().len();
    let full = jointplan(&["plan", &folder("llama-3.2-1b"), "--layers", "3", "--json"]);
    ok(&full);
    let summary: Value = serde_json::from_slice(&full.stdout).unwrap();
    assert!(summary["nodes"].as_array().unwrap().len() > nodes);
}

#[test]
fn synth_flags_override_the_folder_defaults() {
    let plan_with = |extra: &[&str]| -> Value {
        let mut args = vec!["plan", "--json", "--layers", "1"];
        let f = folder("llama-3.2-1b");
        args.insert(1, &f);
        args.extend_from_slice(extra);
        ok_json(&args)
    };
    let default = plan_with(&[]);
    let server = plan_with(&["--policy", "server"]);
    assert_ne!(default["plan_id"], server["plan_id"]);
    let device = models().join("devices/a100-40gb.json");
    let small = plan_with(&["--device", &s(&device)]);
    assert_ne!(default["plan_id"], small["plan_id"]);
    assert_ne!(
        default["memory"]["usable_capacity_bytes"],
        small["memory"]["usable_capacity_bytes"]
    );
}

#[test]
fn folder_errors_name_the_folder_and_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    // No config.json.
    let result = jointplan(&["plan", &s(dir.path())]);
    assert_eq!(result.status.code(), Some(2));
    let stderr = text(&result.stderr);
    assert!(stderr.contains(&s(dir.path())), "{stderr}");
    assert!(stderr.contains("config.json"), "{stderr}");
    // A bad override names the folder and the option.
    let result = jointplan(&["plan", &folder("llama-3.2-1b"), "--weight-format", "fp7"]);
    assert_eq!(result.status.code(), Some(2));
    let stderr = text(&result.stderr);
    assert!(stderr.contains("llama-3.2-1b"), "{stderr}");
    assert!(stderr.contains("--weight-format"), "{stderr}");
    // Nothing is written on failure.
    let out = dir.path().join("never.plan.json");
    let result = jointplan(&["plan", &s(dir.path()), "-o", &s(&out)]);
    assert_eq!(result.status.code(), Some(2));
    assert!(!out.exists());
}

#[test]
fn synth_flags_are_refused_for_a_request_file() {
    let request = models().join("tiny/request.json");
    let result = jointplan(&["plan", &s(&request), "--layers", "2"]);
    assert_eq!(result.status.code(), Some(2));
    let stderr = text(&result.stderr);
    assert!(stderr.contains("--layers"), "{stderr}");
    assert!(stderr.contains("tiny/request.json"), "{stderr}");
}

#[test]
fn selection_limits_reach_the_solver() {
    let request = models().join("decoder-2layer/request.json");
    // No time at all: decoder-2layer needs no integer program (propagation, presolve and
    // the frontier decide every node), so the limit changes nothing and the plan is the
    // unlimited one, byte for byte.
    let dir = tempfile::tempdir().unwrap();
    let limited = dir.path().join("limited.plan.json");
    let unlimited = dir.path().join("unlimited.plan.json");
    let result = jointplan(&[
        "plan",
        &s(&request),
        "--time-limit",
        "0",
        "--dp-state-budget",
        "1",
        "-o",
        &s(&limited),
    ]);
    assert_eq!(result.status.code(), Some(0), "{}", text(&result.stderr));
    let result = jointplan(&["plan", &s(&request), "-o", &s(&unlimited)]);
    assert_eq!(result.status.code(), Some(0), "{}", text(&result.stderr));
    assert_eq!(
        std::fs::read(&limited).unwrap(),
        std::fs::read(&unlimited).unwrap()
    );
    // A bad limit is bad input.
    let result = jointplan(&["plan", &s(&request), "--time-limit=-1"]);
    assert_eq!(result.status.code(), Some(2));
    assert!(text(&result.stderr).contains("--time-limit -1"));
    // Certified components are not listed as uncertified, with or without the flag.
    for extra in [&[][..], &["--allow-uncertified"][..]] {
        let mut args = vec!["plan".to_owned(), s(&request), "--json".to_owned()];
        args.extend(extra.iter().map(|a| (*a).to_owned()));
        let summary = ok_json(&args.iter().map(String::as_str).collect::<Vec<_>>());
        assert_eq!(summary["uncertified"], Value::Array(Vec::new()));
        for component in summary["selection"].as_array().unwrap() {
            assert_eq!(component["status"], "optimal");
        }
    }
}

#[test]
fn a_refused_uncertified_selection_exits_1_naming_the_component() {
    // No shipped request makes the integer program stop after a first solution (their
    // relaxations are integral at the root), so the refusal is checked on the error itself.
    let error = jointplan::builder::error::PlanError::Candidates(CandidateError::Uncertified {
        components: vec!["the component of node node.layer.0.attention (Feasible, gap unknown: none: a limit stopped the integer program at the rank-1 count level)".to_owned()],
    });
    assert_eq!(error.kind(), jointplan::ErrorKind::Infeasible);
    let message = error.to_string();
    assert!(message.contains("node.layer.0.attention"), "{message}");
    assert!(message.contains("--allow-uncertified"), "{message}");
    assert_eq!(
        jointplan::Error::from(error).kind(),
        jointplan::ErrorKind::Infeasible
    );
}

#[test]
fn a_closed_stdout_pipe_ends_the_output_without_a_panic() {
    use std::process::Stdio;
    let mut child = Command::new(env!("CARGO_BIN_EXE_jointplan"))
        .args(["plan", &folder("llama-3.1-8b")])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Close the reading end at once, as `| head -1` does after its line.
    drop(child.stdout.take());
    let output = child.wait_with_output().unwrap();
    let stderr = text(&output.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(output.status.code(), Some(0), "{stderr}");
}

/// Every model folder shipped in `models/` plans in full with its own defaults (device,
/// policy, format): the README's main job. A serving refusal (not even one sequence fits)
/// or any other error on a shipped model is a regression, whatever the golden plans (built
/// at reduced layer counts) say.
#[test]
fn every_shipped_model_plans_in_full_with_its_defaults() {
    let mut folders: Vec<PathBuf> = std::fs::read_dir(models())
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.join("config.json").is_file())
        .collect();
    folders.sort();
    assert!(folders.len() >= 10, "{folders:?}");
    for folder in &folders {
        let result = jointplan(&["plan", &s(folder)]);
        assert_eq!(
            result.status.code(),
            Some(0),
            "{}: {}",
            folder.display(),
            text(&result.stderr)
        );
        let stdout = text(&result.stdout);
        assert!(stdout.starts_with("plan plan/sha256/"), "{stdout}");
        assert!(stdout.contains("sequences that fit"), "{stdout}");
    }
}
