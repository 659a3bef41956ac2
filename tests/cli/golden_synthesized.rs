//! Golden plan hashes of every shipped model folder, synthesized at a reduced size and
//! planned through the command line exactly as a user runs it (`jointplan plan FOLDER
//! --layers N`). The golden plans of `tests/planner/golden_models.rs` are three hand-made
//! requests; these are the real architectures (dense, MoE, hybrid, sliding-window), so a
//! change anywhere from the config reader to the plan file's bytes moves a hash here.
//!
//! DeepSeek-V3 at 6 layers and 80 routed experts makes a plan file over 4 MiB: the size at
//! which a stored plan is read in parallel pieces. It is planned under one and under two
//! threads (byte-identical files), then `check`ed and `verify`d from the file.
//!
//! Bless after an intended change: `JOINTPLAN_BLESS=1 cargo test --test cli golden_synthesized`
//! (writes `tests/golden/synthesized-plan-hashes.json`; say why in the commit).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::process::{ok, s, text};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).to_path_buf()
}

/// The size each folder is planned at: two layers, and for DeepSeek-V3 the size whose
/// plan file is read in pieces.
fn size_flags(name: &str) -> Vec<&'static str> {
    match name {
        "deepseek-v3" => vec!["--layers", "6", "--experts", "80"],
        _ => vec!["--layers", "2"],
    }
}

/// Runs `jointplan ARGS` with `threads` rayon threads.
fn jointplan_in(threads: usize, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_jointplan"))
        .args(args)
        .env("RAYON_NUM_THREADS", threads.to_string())
        .output()
        .expect("the jointplan binary runs")
}

/// The model folders of `models/` (those with a Hugging Face `config.json`), by name.
fn model_folders() -> Vec<(String, PathBuf)> {
    let mut found: Vec<(String, PathBuf)> = std::fs::read_dir(root().join("models"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|folder| folder.join("config.json").is_file())
        .map(|folder| {
            let name = folder.file_name().unwrap().to_string_lossy().into_owned();
            (name, folder)
        })
        .collect();
    found.sort();
    assert!(found.len() >= 10, "models/ should hold the model folders");
    found
}

#[test]
fn every_model_folder_plans_to_its_golden_hash() {
    let dir = tempfile::tempdir().unwrap();
    let golden_file = root().join("tests/golden/synthesized-plan-hashes.json");
    let mut hashes = BTreeMap::new();
    for (name, folder) in model_folders() {
        let flags = size_flags(&name);
        let plan_file = dir.path().join(format!("{name}.plan.json"));
        let mut args = vec!["plan".to_owned(), s(&folder)];
        args.extend(flags.iter().map(|f| (*f).to_owned()));
        args.extend(["-o".to_owned(), s(&plan_file)]);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        ok(&jointplan_in(2, &args));
        let bytes = std::fs::read(&plan_file).unwrap();
        let plan: Value = serde_json::from_slice(&bytes).unwrap();
        let hash = plan["plan_hash"].as_str().unwrap().to_owned();
        if name == "deepseek-v3" {
            assert!(
                bytes.len() > 4 << 20,
                "{name}: {} bytes, not over 4 MiB: enlarge its size",
                bytes.len()
            );
            a_large_plan_is_deterministic_and_reads_back(dir.path(), &folder, &flags, &bytes);
        }
        hashes.insert(name, hash);
    }
    let Some(golden) = crate::common::golden::bless_or_read(&golden_file, &hashes) else {
        return;
    };
    let moved: Vec<String> = golden
        .keys()
        .chain(hashes.keys())
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .filter(|name| golden.get(*name) != hashes.get(*name))
        .map(|name| {
            format!(
                "{name}: golden {:?}, now {:?}",
                golden.get(name),
                hashes.get(name)
            )
        })
        .collect();
    assert!(
        moved.is_empty(),
        "plan hashes of model folders changed; if intended, bless with JOINTPLAN_BLESS=1 in \
         a commit that says why:\n{}",
        moved.join("\n")
    );
}

/// The plan under one thread is the same file; `check` and `verify` (against the folder's
/// synthesized request) accept it.
fn a_large_plan_is_deterministic_and_reads_back(
    dir: &Path,
    folder: &Path,
    flags: &[&str],
    two_threads: &[u8],
) {
    let one_file = dir.join("deepseek-one-thread.plan.json");
    let mut args = vec!["plan".to_owned(), s(folder)];
    args.extend(flags.iter().map(|f| (*f).to_owned()));
    args.extend(["-o".to_owned(), s(&one_file)]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    ok(&jointplan_in(1, &args));
    assert!(
        std::fs::read(&one_file).unwrap() == two_threads,
        "one and two threads wrote different plan files"
    );

    let check = jointplan_in(2, &["check", &s(&one_file)]);
    ok(&check);
    let request = dir.join("deepseek.request.json");
    let mut args = vec!["synth".to_owned(), "--model".to_owned(), s(folder)];
    args.extend(flags.iter().map(|f| (*f).to_owned()));
    args.extend(["-o".to_owned(), s(&request)]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    ok(&jointplan_in(2, &args));
    ok(&jointplan_in(2, &["verify", &s(&request), &s(&one_file)]));

    // One selection reason changed in the large file: both refuse it.
    let stored = String::from_utf8(two_threads.to_vec()).unwrap();
    let tampered_text =
        stored.replacen("\"preferred_compatible\"", "\"fallback_from_preferred\"", 1);
    assert_ne!(
        tampered_text, stored,
        "the plan has a preferred_compatible node"
    );
    let tampered = dir.join("deepseek-tampered.plan.json");
    std::fs::write(&tampered, tampered_text).unwrap();
    for args in [
        vec!["check".to_owned(), s(&tampered)],
        vec!["verify".to_owned(), s(&request), s(&tampered)],
    ] {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let refused = jointplan_in(2, &args);
        assert_eq!(
            refused.status.code(),
            Some(1),
            "{args:?} accepted a tampered plan"
        );
        // `check` reports its findings on stdout, `verify` its error on stderr: both name
        // the plan hash the payload no longer has.
        let said = text(&refused.stdout) + &text(&refused.stderr);
        assert!(said.contains("plan_hash"), "{args:?}: {said}");
        // Both name the field changed, by its JSON path.
        assert!(
            said.contains(".selection.selection_reason"),
            "{args:?}: {said}"
        );
    }
}
