//! The output-file rules (docs/security.md) as the command line applies them: regular files
//! are replaced atomically, special files are refused and left as they are, symbolic links
//! are followed and kept, an input is never overwritten unless asked, temporary files carry
//! a recognisable name and are removed on SIGTERM; input limits are exit 2 naming the limit
//! and its flag.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn jointplan(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_jointplan"))
        .args(args)
        .output()
        .expect("the jointplan binary runs")
}

fn repo(path: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(path)
        .display()
        .to_string()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

fn path(p: &Path) -> String {
    p.display().to_string()
}

#[cfg(unix)]
#[test]
fn plan_refuses_a_fifo_and_a_device_and_leaves_them_alone() {
    use std::os::unix::fs::FileTypeExt;
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("plan.fifo");
    assert!(Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let out = jointplan(&[
        "plan",
        &repo("models/tiny/request.json"),
        "-o",
        &path(&fifo),
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("a FIFO"), "{}", stderr(&out));
    assert!(std::fs::symlink_metadata(&fifo)
        .unwrap()
        .file_type()
        .is_fifo());
    assert_eq!(
        names(dir.path()),
        ["plan.fifo"],
        "no temporary file is left"
    );
    let out = jointplan(&["plan", &repo("models/tiny/request.json"), "-o", "/dev/null"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("a character device"),
        "{}",
        stderr(&out)
    );
    assert!(std::fs::metadata("/dev/null")
        .unwrap()
        .file_type()
        .is_char_device());
}

#[cfg(unix)]
#[test]
fn plan_and_seal_write_through_a_symbolic_link_and_keep_it() {
    let dir = tempfile::tempdir().unwrap();
    let request = dir.path().join("request.json");
    std::fs::copy(repo("models/tiny/request.json"), &request).unwrap();
    let link = dir.path().join("request-link.json");
    std::os::unix::fs::symlink(&request, &link).unwrap();
    let out = jointplan(&["seal", &path(&link)]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(std::fs::symlink_metadata(&link)
        .unwrap()
        .file_type()
        .is_symlink());

    let plan = dir.path().join("plan.json");
    std::fs::write(&plan, "old").unwrap();
    let plan_link = dir.path().join("plan-link.json");
    std::os::unix::fs::symlink(&plan, &plan_link).unwrap();
    let out = jointplan(&["plan", &path(&request), "-o", &path(&plan_link)]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(std::fs::symlink_metadata(&plan_link)
        .unwrap()
        .file_type()
        .is_symlink());
    let written = std::fs::read_to_string(&plan).unwrap();
    assert!(written.starts_with('{'), "the link's target holds the plan");
}

#[test]
fn plan_refuses_to_overwrite_its_request_unless_asked() {
    let dir = tempfile::tempdir().unwrap();
    let request = dir.path().join("request.json");
    std::fs::copy(repo("models/tiny/request.json"), &request).unwrap();
    let before = std::fs::read(&request).unwrap();
    let out = jointplan(&["plan", &path(&request), "-o", &path(&request)]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("--overwrite-input"),
        "{}",
        stderr(&out)
    );
    assert_eq!(std::fs::read(&request).unwrap(), before);
    let out = jointplan(&[
        "plan",
        &path(&request),
        "-o",
        &path(&request),
        "--overwrite-input",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_ne!(std::fs::read(&request).unwrap(), before);
}

#[test]
fn synth_refuses_to_overwrite_the_config_it_reads() {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("model");
    std::fs::create_dir(&model).unwrap();
    for file in ["config.json", "synth.json"] {
        let from = Path::new(&repo("models/llama-3.2-1b")).join(file);
        if from.exists() {
            std::fs::copy(from, model.join(file)).unwrap();
        }
    }
    let config = model.join("config.json");
    let before = std::fs::read(&config).unwrap();
    let device = repo("models/devices/rtx-4090-24gb.json");
    let out = jointplan(&[
        "synth",
        "--model",
        &path(&model),
        "--device",
        &device,
        "-o",
        &path(&config),
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("refusing to overwrite an input"),
        "{}",
        stderr(&out)
    );
    assert_eq!(std::fs::read(&config).unwrap(), before);
}

#[cfg(unix)]
#[test]
fn sigterm_removes_the_temporary_file_of_a_plan_being_built() {
    let dir = tempfile::tempdir().unwrap();
    let plan = dir.path().join("plan.json");
    // A model large enough that planning outlasts the polling below by a wide margin.
    let mut child = Command::new(env!("CARGO_BIN_EXE_jointplan"))
        .args(["plan", &repo("models/deepseek-v3"), "-o", &path(&plan)])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // The temporary file is created before planning starts.
    let partial = loop {
        if let Some(name) = names(dir.path())
            .into_iter()
            .find(|n| n.starts_with("plan.json.jointplan-partial-"))
        {
            break dir.path().join(name);
        }
        if let Some(status) = child.try_wait().unwrap() {
            panic!("jointplan ended ({status}) before its temporary file appeared");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    assert!(partial.exists());
    let killed = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let status = child.wait().unwrap();
    let left: Vec<PathBuf> = names(dir.path())
        .iter()
        .map(|n| dir.path().join(n))
        .collect();
    if status.code() == Some(0) {
        // The plan finished before the signal landed: then it is complete and alone.
        assert_eq!(left, [plan]);
    } else {
        assert_eq!(status.code(), Some(143), "exit status 128 + SIGTERM");
        assert!(left.is_empty(), "left behind: {left:?}");
    }
}

#[test]
fn input_limits_are_exit_2_naming_the_limit_and_the_flag() {
    let dir = tempfile::tempdir().unwrap();
    // An opaque config holding a long array is refused by the streaming pass.
    let body = std::fs::read_to_string(repo("models/tiny/request.json")).unwrap();
    let big: serde_json::Value = serde_json::from_str(&body).unwrap();
    let mut big = big;
    big["family"]["canonical_config"] = serde_json::json!({"blob": vec![0; 2_000]});
    let request = dir.path().join("big.json");
    std::fs::write(&request, serde_json::to_string(&big).unwrap()).unwrap();
    let out = jointplan(&["plan", &path(&request), "--limit", "array-elements=1000"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let text = stderr(&out);
    assert!(
        text.contains("family.canonical_config.blob[1000]"),
        "{text}"
    );
    assert!(text.contains("--limit array-elements=N"), "{text}");
    // The same input under the default limits plans (its config is opaque).
    assert_eq!(jointplan(&["hash", &path(&request)]).status.code(), Some(0));
    let out = jointplan(&["hash", &path(&request), "--limit", "file-bytes=1K"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("`file-bytes`"), "{}", stderr(&out));
    let out = jointplan(&["plan", "/dev/zero"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("not a JSON document"),
        "{}",
        stderr(&out)
    );
    let out = jointplan(&[
        "plan",
        &repo("models/tiny/request.json"),
        "--limit",
        "nodes=2",
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("--limit nodes=N"), "{}", stderr(&out));
    // Node counts are held while the text is scanned, before anything is built.
    let mut problem: serde_json::Value =
        serde_json::from_str(include_str!("../data/spec-example.json")).unwrap();
    let node = problem["nodes"][0].clone();
    for id in ["copy.1", "copy.2"] {
        let mut copy = node.clone();
        copy["id"] = serde_json::Value::from(id);
        problem["nodes"].as_array_mut().unwrap().push(copy);
    }
    let problem_file = dir.path().join("problem.json");
    std::fs::write(&problem_file, problem.to_string()).unwrap();
    assert_eq!(
        jointplan(&["solve", &path(&problem_file)]).status.code(),
        Some(0)
    );
    let out = jointplan(&["solve", &path(&problem_file), "--limit", "nodes=2"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("nodes[2]"), "{}", stderr(&out));
    assert!(stderr(&out).contains("--limit nodes=N"), "{}", stderr(&out));
    let out = jointplan(&["plan", &repo("models/tiny/request.json"), "--limit", "x=1"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
}

#[test]
fn a_plan_over_its_wire_limit_replaces_nothing_and_leaves_no_temporary_file() {
    // The plan file streams into its temporary file while the plan is checked; a plan the
    // wire limit refuses must leave the destination as it was and nothing beside it.
    let dir = tempfile::tempdir().unwrap();
    let mut request: serde_json::Value =
        serde_json::from_slice(&std::fs::read(repo("models/tiny/request.json")).unwrap()).unwrap();
    request["policy"]["wire_limits"] = serde_json::json!({
        "maximum_resource_rows": 65536,
        "maximum_plan_json_bytes": 20000
    });
    let request_file = dir.path().join("request.json");
    std::fs::write(&request_file, serde_json::to_vec(&request).unwrap()).unwrap();
    let plan = dir.path().join("plan.json");
    std::fs::write(&plan, b"the old plan").unwrap();
    let out = jointplan(&["plan", &path(&request_file), "-o", &path(&plan)]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("maximum_plan_json_bytes = 20000"),
        "{}",
        stderr(&out)
    );
    assert_eq!(std::fs::read(&plan).unwrap(), b"the old plan");
    assert_eq!(names(dir.path()), ["plan.json", "request.json"]);
    // Under a limit it fits, the same command replaces the file with the whole plan.
    request["policy"]["wire_limits"]["maximum_plan_json_bytes"] = serde_json::json!(1u64 << 30);
    std::fs::write(&request_file, serde_json::to_vec(&request).unwrap()).unwrap();
    let out = jointplan(&["plan", &path(&request_file), "-o", &path(&plan)]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let written = std::fs::read(&plan).unwrap();
    assert!(written.len() > 20000 && written.ends_with(b"}\n"));
    assert_eq!(names(dir.path()), ["plan.json", "request.json"]);
}
