//! `--device D --count N` timed by the device file's `links` (docs/placement.md, "Device
//! files: links"): the shorthand and the set file that spells the same devices and links
//! give one answer (two spellings, one placement, the same predicted times); `fit --devices
//! DIR --max-count N` with a latency target answers the count `plan` reproduces, one fewer
//! missing the target; a device file without links, or with bad link values, is refused
//! naming the file, the key and what to add.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::process::{jointplan, ok, ok_json, s, text};

fn path(relative: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(relative)
        .display()
        .to_string()
}

const MODEL: &str = "models/llama-3.1-8b";
const SERVING: [&str; 8] = [
    "--context",
    "4096",
    "--concurrency",
    "4",
    "--input-tokens",
    "512",
    "--output-tokens",
    "64",
];

/// The shipped device file's JSON.
fn device_json(file: &str) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path(file)).unwrap()).unwrap()
}

/// A set file in `dir` naming `count` devices of `device` (absolute path) in one domain
/// with the device file's own peer link, and a host tier of `host_memory` bytes on its
/// host link: the spelling of `--device D --count N --host-memory M` as a set, under the
/// name the shorthand gives its set.
fn equivalent_set(dir: &Path, device: &str, count: u32, host_memory: u64) -> PathBuf {
    let json = device_json(device);
    let links = &json["links"];
    let kind = links["peer"]["kind"].as_str().unwrap();
    let set = serde_json::json!({
        "name": format!("{count} x {}", json["name"].as_str().unwrap()),
        "devices": [{"file": path(device), "count": count, "domain": format!("{kind}.0")}],
        "domains": [{"id": format!("{kind}.0"), "link": links["peer"]}],
        "host": {"memory_bytes": host_memory, "link": links["host"]}
    });
    let file = dir.join(format!("set-{count}.json"));
    std::fs::write(&file, set.to_string()).unwrap();
    file
}

fn plan_json(placement: &[&str], extra: &[&str]) -> Value {
    let model = path(MODEL);
    let mut args = vec!["plan", model.as_str()];
    args.extend_from_slice(placement);
    args.extend_from_slice(&SERVING);
    args.extend_from_slice(extra);
    args.push("--json");
    ok_json(&args)
}

#[test]
fn the_shorthand_and_its_set_file_give_one_answer() {
    let dir = tempfile::tempdir().unwrap();
    let host = "1000000000000";
    for (device, count, pins) in [
        ("models/devices/h100-sxm-80gb.json", 4, &[][..]),
        (
            "models/devices/a100-80gb.json",
            4,
            &["--tensor-parallel", "2", "--pipeline-parallel", "2"][..],
        ),
        ("models/devices/l40s-48gb.json", 2, &[][..]),
    ] {
        let set = equivalent_set(dir.path(), device, count, host.parse().unwrap());
        let mut extra = vec!["--placement-objective", "min-tpot"];
        extra.extend_from_slice(pins);
        let n = count.to_string();
        let shorthand = plan_json(
            &[
                "--device",
                &path(device),
                "--count",
                &n,
                "--host-memory",
                host,
            ],
            &extra,
        );
        let spelled = plan_json(&["--devices", &s(&set)], &extra);
        // The same placement (its id hashes the devices, their domain and the set's name)
        // and the same figures, links included.
        assert_eq!(
            shorthand["plan"]["placement_id"], spelled["plan"]["placement_id"],
            "{device}"
        );
        assert_eq!(shorthand["performance"], spelled["performance"], "{device}");
        let payload = &shorthand["plan"]["payload"];
        if pins.is_empty() {
            // Time-optimal on the file's link: every device in one tensor-parallel group.
            assert_eq!(payload["tensor_parallel"], count, "{device}");
        } else {
            assert_eq!(payload["pipeline_parallel"], 2, "{device}");
        }
        let links: Vec<String> = shorthand["performance"]["links"]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| l.as_str().unwrap().to_owned())
            .collect();
        let peer = device_json(device)["links"]["peer"]["bandwidth_bytes_per_second"]
            .as_u64()
            .unwrap();
        let shown = format!("{:.1} GB/s", peer as f64 / 1e9);
        assert!(
            links
                .iter()
                .any(|l| l.contains("tensor-parallel") && l.contains(&shown)),
            "{device}: {links:?}"
        );
    }
}

/// `fit MODEL --devices DIR --max-count 4` with the serving point and `extra`.
fn fit_rows(dir: &Path, extra: &[&str]) -> Value {
    let model = path(MODEL);
    let mut args = vec![
        "fit",
        model.as_str(),
        "--devices",
        dir.to_str().unwrap(),
        "--max-count",
        "4",
    ];
    args.extend_from_slice(&SERVING[..2]);
    args.extend_from_slice(&SERVING[2..]);
    args.extend_from_slice(extra);
    args.push("--json");
    ok_json(&args)
}

#[test]
fn fit_with_a_latency_target_answers_the_count_plan_reproduces() {
    let dir = tempfile::tempdir().unwrap();
    let device = dir.path().join("h100-sxm-80gb.json");
    std::fs::copy(path("models/devices/h100-sxm-80gb.json"), &device).unwrap();
    let at = |n: u32, engine: bool| {
        let n = n.to_string();
        let mut extra = vec!["--placement-objective", "min-tpot"];
        if engine {
            extra.extend_from_slice(&["--engine", "vllm", "--tensor-parallel", &n]);
            plan_json(&["--device", &s(&device), "--count", &n], &extra)
        } else {
            plan_json(&["--device", &s(&device), "--count", &n], &extra)
        }
    };
    for engine in [false, true] {
        let tpot = |v: &Value| v["performance"]["tpot_seconds"].as_f64().unwrap();
        let (one, two) = (at(1, engine), at(2, engine));
        assert!(tpot(&two) < tpot(&one), "{two} {one}");
        // A target between the two: one device misses it, two meet it.
        let target_ms = (tpot(&one) + tpot(&two)) / 2.0 * 1e3;
        let target = format!("{target_ms}");
        let mut extra = vec!["--max-tpot-ms", target.as_str()];
        if engine {
            extra.extend_from_slice(&["--engine", "vllm"]);
        }
        let rows = fit_rows(dir.path(), &extra);
        let row = &rows[0];
        assert_eq!(row["count"], 2, "{row}");
        assert_eq!(row["placement_id"], two["plan"]["placement_id"], "{row}");
        assert_eq!(row["tpot_seconds"], two["performance"]["tpot_seconds"]);
        assert_eq!(row["ttft_seconds"], two["performance"]["ttft_seconds"]);
        // A target no count up to 4 meets: refused with the last count's figures.
        let rows = fit_rows(dir.path(), &["--max-tpot-ms", "0.001"]);
        assert_eq!(rows[0]["count"], Value::Null);
        let reason = rows[0]["reason"].as_str().unwrap();
        assert!(
            reason.starts_with("4 device(s):") && reason.contains("misses the target: TPOT"),
            "{reason}"
        );
    }
}

#[test]
fn fit_times_a_device_without_links_at_one_device_only() {
    let dir = tempfile::tempdir().unwrap();
    let mut json = device_json("models/devices/h100-sxm-80gb.json");
    json.as_object_mut().unwrap().remove("links");
    std::fs::write(dir.path().join("bare.json"), json.to_string()).unwrap();
    let rows = fit_rows(dir.path(), &["--max-tpot-ms", "0.001"]);
    let reason = rows[0]["reason"].as_str().unwrap();
    assert!(
        reason.starts_with("1 device(s):") && reason.contains("states no `links.peer`"),
        "{reason}"
    );
}

#[test]
fn a_device_file_without_links_is_refused_at_more_than_one_device() {
    let dir = tempfile::tempdir().unwrap();
    let mut json = device_json("models/devices/a100-80gb.json");
    json.as_object_mut().unwrap().remove("links");
    let bare = dir.path().join("bare.json");
    std::fs::write(&bare, json.to_string()).unwrap();
    let model = path(MODEL);
    let run = |count: &str| {
        let mut args = vec![
            "plan",
            model.as_str(),
            "--device",
            bare.to_str().unwrap(),
            "--count",
            count,
            "--placement-objective",
            "min-tpot",
        ];
        args.extend_from_slice(&SERVING);
        jointplan(&args)
    };
    let refused = run("2");
    assert_eq!(refused.status.code(), Some(2));
    let stderr = text(&refused.stderr);
    for expected in [bare.to_str().unwrap(), "links.peer", "\"links\": {\"peer\""] {
        assert!(stderr.contains(expected), "{expected}: {stderr}");
    }
    // One device needs no link.
    ok(&run("1"));
}

#[test]
fn bad_link_values_exit_2_naming_the_file_and_the_path() {
    let dir = tempfile::tempdir().unwrap();
    let model = path(MODEL);
    let cases: [(Value, &str); 6] = [
        (
            serde_json::json!({"peer": {"kind": "nvlink", "bandwidth_bytes_per_second": 0}}),
            "links.peer.bandwidth_bytes_per_second: must be positive",
        ),
        (
            serde_json::json!({"peer": {"kind": "nvlink", "bandwidth_bytes_per_second": -5}}),
            "links.peer.bandwidth_bytes_per_second",
        ),
        (
            serde_json::json!({"peer": {"kind": "nvlink", "bandwidth_bytes_per_second": "fast"}}),
            "links.peer.bandwidth_bytes_per_second",
        ),
        (
            serde_json::json!({"host": {"kind": "pcie", "bandwidth_bytes_per_second": 1, "latency_ns": 0}}),
            "links.host.latency_ns: must be positive",
        ),
        (
            serde_json::json!({"peers": {"kind": "nvlink", "bandwidth_bytes_per_second": 1}}),
            "links.peers",
        ),
        (
            serde_json::json!({"peer": {"kind": "infiniband", "bandwidth_bytes_per_second": 1}}),
            "links.peer.kind",
        ),
    ];
    for (i, (links, expected)) in cases.iter().enumerate() {
        let mut json = device_json("models/devices/a100-80gb.json");
        json["links"] = links.clone();
        let file = dir.path().join(format!("bad-{i}.json"));
        std::fs::write(&file, json.to_string()).unwrap();
        // A placement and a single-device plan read the same file the same way.
        for placement in [&["--count", "2"][..], &[][..]] {
            let mut args = vec!["plan", model.as_str(), "--device", file.to_str().unwrap()];
            args.extend_from_slice(placement);
            let result = jointplan(&args);
            assert_eq!(result.status.code(), Some(2), "{links}");
            let stderr = text(&result.stderr);
            assert!(
                stderr.contains(file.to_str().unwrap()) && stderr.contains(expected),
                "{expected}: {stderr}"
            );
        }
    }
}

#[test]
fn a_single_device_plan_ignores_the_links() {
    // The links price placements only: a device file with and without them synthesizes
    // the same request and plans the same bytes.
    let dir = tempfile::tempdir().unwrap();
    let mut json = device_json("models/devices/h100-sxm-80gb.json");
    json.as_object_mut().unwrap().remove("links");
    let bare = dir.path().join("bare.json");
    std::fs::write(&bare, json.to_string()).unwrap();
    let model = path(MODEL);
    let id = |device: &str| {
        let plan = ok_json(&["plan", &model, "--device", device, "--json"]);
        plan["plan_id"]
            .as_str()
            .map(str::to_owned)
            .unwrap_or_else(|| {
                plan["payload"]["plan_id"]
                    .as_str()
                    .map(str::to_owned)
                    .unwrap()
            })
    };
    assert_eq!(
        id(&path("models/devices/h100-sxm-80gb.json")),
        id(bare.to_str().unwrap())
    );
}

#[test]
fn gathered_facts_place_as_a_fresh_gathering() {
    // `fit --max-count N` places every count of a file from one gathering of the model
    // (`placement::Gathered`): each placement is the one `place` makes from its own.
    use jointplan::placement::{self, DeviceSet, Gathered, Settings};
    let mut source = jointplan::synth::ModelSource::folder(path(MODEL));
    source.layers = Some(4);
    let options = jointplan::BuildOptions::default();
    let budget = placement::DEFAULT_ENUMERATION_BUDGET;
    let device = path("models/devices/a100-80gb.json");
    let mut gathered = Gathered::kept();
    for n in [1, 2, 4] {
        let set = DeviceSet::uniform(Path::new(&device), n, None).unwrap();
        let settings = Settings {
            tensor_parallel: Some(n),
            ..Settings::default()
        };
        let fresh = placement::place(&source, &set, &settings, &options, budget).unwrap();
        let reused = placement::place_with(
            &source,
            &set,
            &settings,
            &options,
            budget,
            &mut gathered,
            placement::Reasons::WithLevers,
        )
        .unwrap();
        assert_eq!(fresh.plan.payload.tensor_parallel, n);
        assert_eq!(
            serde_json::to_value(&fresh.plan).unwrap(),
            serde_json::to_value(&reused.plan).unwrap(),
            "{n}"
        );
    }
    // One gathering served the three counts.
    assert_eq!(gathered.counts(), (1, 0));
}
