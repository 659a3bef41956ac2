//! The memory figures `jointplan plan` prints agree with the library's memory report: the
//! line saying the pools share a capacity names the report's dynamic capacity (usable −
//! static) and its sum of pool maxima, by the same rule.

use std::path::{Path, PathBuf};

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

/// The numbers of one `explain trade-off` detail line after each marker, each marker looked
/// for after the previous one.
fn numbers(line: &str, markers: &[&str]) -> Vec<u64> {
    let mut rest = line;
    let mut found = Vec::new();
    for marker in markers {
        found.push(number_after(rest, marker));
        let at = rest.find(marker).unwrap_or(0) + marker.len();
        rest = &rest[at..];
    }
    found
}

/// Synthesizes `model` under `policy` (none: the folder's), plans it and explains its layer-0
/// attention node with the request: the plan's text and the explanation.
fn plan_and_explain(
    dir: &Path,
    model: &str,
    policy: Option<&str>,
) -> (String, String, PathBuf, PathBuf) {
    let request = dir.join("request.json");
    let plan = dir.join("plan.json");
    let mut synth = vec!["synth", "--model"];
    let folder = folder(model);
    synth.push(&folder);
    if let Some(policy) = policy {
        synth.extend(["--policy", policy]);
    }
    let request_arg = s(&request);
    synth.extend(["-o", &request_arg]);
    ok(&jointplan(&synth));
    let planned = jointplan(&["plan", &request_arg, "-o", &s(&plan)]);
    ok(&planned);
    let explained = jointplan(&[
        "explain",
        &s(&plan),
        "--request",
        &request_arg,
        "--node",
        "node.layer.0.attention",
    ]);
    ok(&explained);
    (
        text(&planned.stdout),
        text(&explained.stdout),
        request,
        plan,
    )
}

/// llama-3.1-8b on the A100 80 GB under the `interactive` preset (contiguous storage ranked
/// first, 4 sequences of 131,072 tokens): the contiguous-cache kernel is preferred and
/// chosen, the paged one fits more sequences, and both `plan` and `explain` say so with the
/// figures computed here by hand (131,072 KV bytes per token, 32 layers, 64 KiB blocks).
#[test]
fn explain_shows_the_contiguous_versus_paged_trade_off_on_llama_3_1_8b() {
    let dir = tempfile::tempdir().unwrap();
    let (plan_text, out, request, plan) = plan_and_explain(dir.path(), "llama-3.1-8b", None);
    assert!(
        plan_text.contains("only 3 of the policy's 4 sequences fit at the maximum context"),
        "{plan_text}"
    );
    let lines: Vec<&str> = out.lines().collect();
    let head = lines
        .iter()
        .position(|l| l.starts_with("explain trade-off"))
        .unwrap_or_else(|| panic!("no trade-off line:\n{out}"));
    assert!(
        lines[head].contains("Memory semantics of the KV cache"),
        "{out}"
    );
    let (contiguous, paged, room) = (lines[head + 1], lines[head + 2], lines[head + 3]);
    assert!(
        contiguous.contains("provider.cuda.causal_paged_attention.contiguous (selected"),
        "{out}"
    );
    assert!(
        paged.contains("provider.cuda.causal_paged_attention.paged (compatible, not chosen)"),
        "{out}"
    );
    let room = number_after(room, "room for sequences:");
    let per_token = 131_072u64;
    let context = 131_072u64;
    let reserved = per_token * context;
    assert_eq!(
        numbers(contiguous, &["reserves", "the whole", "context,", "admits"]),
        vec![reserved, context, 32, room / reserved]
    );
    let admission = 32 * 65_536;
    assert_eq!(
        numbers(
            paged,
            &["reserves", "one", "admits", "at most", "context", "->"]
        ),
        vec![
            admission,
            65_536,
            room / admission,
            4,
            reserved,
            room / reserved
        ]
    );
    assert_eq!(room / reserved, 3);
    assert!(
        room / admission > 4,
        "the paged kernel admits every sequence"
    );

    // The room is the serving report's headroom for sequences.
    let stored: ExecutionPlan = serde_json::from_slice(&std::fs::read(&plan).unwrap()).unwrap();
    let parsed: jointplan::request::PlanRequest =
        serde_json::from_slice(&std::fs::read(&request).unwrap()).unwrap();
    let report = jointplan::study::ServingReport::of(&parsed, &stored).unwrap();
    assert_eq!(i128::from(room), report.headroom_bytes);
}

/// Under the `server` preset (paged storage ranked first) the paged kernel is chosen: no
/// trade-off to show.
#[test]
fn no_trade_off_line_when_the_paged_kernel_is_chosen() {
    let dir = tempfile::tempdir().unwrap();
    let (_, out, _, _) = plan_and_explain(dir.path(), "llama-3.2-1b", Some("server"));
    assert!(!out.contains("explain trade-off"), "{out}");
    assert!(
        out.contains("selected:  provider.cuda.causal_paged_attention.paged"),
        "{out}"
    );
}
