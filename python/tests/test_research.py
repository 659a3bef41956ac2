"""check, explain, diff and fit from Python against the command line's JSON on the
shipped models, and their errors."""

import json

import pytest

import jointplan
from conftest import ROOT, cli, cli_json

LLAMA = ROOT / "models" / "llama-3.2-1b"
TINY = ROOT / "models" / "tiny" / "request.json"
PAGED = "provider.cuda.causal_paged_attention.paged"


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    """A one-layer llama-3.2-1b request and its plan, as files."""
    dir = tmp_path_factory.mktemp("llama")
    request = dir / "request.json"
    request.write_text(json.dumps(jointplan.synth(LLAMA, layers=1)))
    plan = jointplan.plan(request, threads=1)
    path = dir / "plan.json"
    path.write_text(plan.json())
    return request, path, plan


def test_check_equals_the_command_line_on_valid_and_broken_plans(llama, tmp_path):
    _, path, plan = llama
    report = jointplan.check(path)
    assert report.valid and report.violations == []
    assert report.to_dict() == cli_json("check", str(path), "--json")
    assert jointplan.check(plan).to_dict() == report.to_dict()
    broken = plan.to_dict()
    node = broken["payload"]["nodes"][0]
    node["provider_resources"]["provider_id"] = "provider.cuda.nonexistent"
    broken_path = tmp_path / "broken.json"
    broken_path.write_text(json.dumps(broken))
    report = jointplan.check(broken_path)
    assert not report.valid
    result = cli("check", str(broken_path), "--json")
    assert result.returncode == 1, result.stderr
    assert report.to_dict() == json.loads(result.stdout)
    assert report.table()["rule"] == [v["rule"] for v in report.violations]


def test_a_plan_that_does_not_parse_is_rejected_like_on_the_command_line(tmp_path):
    path = tmp_path / "plan.json"
    path.write_text('{"payload": 1}')
    with pytest.raises(jointplan.Rejected) as caught:
        jointplan.check(path)
    assert caught.value.path == "payload"
    assert cli("check", str(path)).returncode == 1
    with pytest.raises(jointplan.BadInput):
        jointplan.check(tmp_path / "missing.json")


def test_why_not_equals_the_command_line(llama):
    request, path, plan = llama
    explanation = jointplan.explain(path, request)
    attention = next(n for n in explanation.nodes if n["node"] == "node.layer.0.attention")
    assert attention["selection"]["selected_provider"] == plan.providers()[attention["node"]]
    passed_over = [a["provider"] for a in attention["alternatives"]]
    assert PAGED in passed_over
    answer = jointplan.explain(path, request, why_not=("node.layer.0.attention", PAGED),
                               threads=1).why_not
    expected = cli_json("explain", str(path), "--request", str(request), "--why-not",
                        f"node.layer.0.attention={PAGED}", "--json")
    assert answer == expected
    assert answer["status"] == "feasible"
    # The string form and model= give the same answer.
    assert jointplan.explain(path, model=LLAMA, layers=1,
                             why_not=f"node.layer.0.attention={PAGED}").why_not == expected


def test_explain_lists_the_providers_the_command_line_lists(llama):
    request, path, _ = llama
    explanation = jointplan.explain(path, request)
    text = cli("explain", str(path), "--request", str(request)).stdout
    for node in explanation.nodes:
        assert f"node {node['node']} (operation" in text
        for alternative in node["alternatives"]:
            if alternative["dropped"] is None:
                assert f"    {alternative['provider']}\n" in text
    table = explanation.table()
    assert table["node"] == [n["node"] for n in explanation.nodes]
    # Without the request, no alternatives; one node alone; errors name the culprit.
    alone = jointplan.explain(path, node="node.layer.0.attention")
    assert [n["node"] for n in alone.nodes] == ["node.layer.0.attention"]
    assert alone.nodes[0]["alternatives"] is None
    with pytest.raises(jointplan.BadInput, match="no such node"):
        jointplan.explain(path, node="node.missing")
    with pytest.raises(jointplan.BadInput, match="give the request"):
        jointplan.explain(path, why_not=("node.layer.0.attention", PAGED))


def test_diff_equals_the_command_line(llama, tmp_path):
    request, path, plan = llama
    pinned = jointplan.plan(request, pins={"node.layer.0.attention": PAGED}, threads=1)
    assert pinned.providers()["node.layer.0.attention"] == PAGED
    pinned_path = tmp_path / "pinned.json"
    pinned_path.write_text(pinned.json())
    # The pin is the command line's --pin: the same plan id.
    assert pinned.plan_id == cli_json("plan", str(request), "--pin",
                                      f"node.layer.0.attention={PAGED}", "--json")["plan_id"]
    diff = jointplan.diff(path, pinned_path)
    assert diff.to_dict() == cli_json("diff", str(path), str(pinned_path), "--json")
    with_reports = jointplan.diff(plan, pinned, request)
    assert with_reports.to_dict() == cli_json("diff", str(path), str(pinned_path),
                                              "--request", str(request), "--json")
    assert not diff.is_empty()
    assert diff.nodes_table()["node"] == ["node.layer.0.attention"]
    memory = with_reports.memory_table()
    assert any(name.startswith("report.") for name in memory["figure"])
    assert all(d == b - a for a, b, d in zip(memory["a"], memory["b"], memory["delta"]))
    assert jointplan.diff(path, path).is_empty()


def test_forbid_equals_the_command_line(llama):
    request, _, plan = llama
    chosen = plan.providers()["node.layer.0.attention"]
    forbidden = jointplan.plan(request, forbids={"node.layer.0.attention": [chosen]})
    assert forbidden.providers()["node.layer.0.attention"] != chosen
    assert forbidden.plan_id == cli_json("plan", str(request), "--forbid",
                                         f"node.layer.0.attention={chosen}",
                                         "--json")["plan_id"]
    with pytest.raises(jointplan.BadInput, match="bad node id"):
        jointplan.plan(request, pins={"not a node": PAGED})


@pytest.mark.parametrize("knob", ["sequences", "context"])
def test_fit_equals_the_command_line(knob):
    answer = jointplan.fit(model=LLAMA, layers=1, maximize=knob, threads=1)
    expected = cli_json("fit", "models/llama-3.2-1b", "--layers", "1", "--maximize", knob,
                        "--json")
    assert answer.to_dict() == expected
    assert answer.largest == expected["largest"] and answer.plan_id == expected["plan_id"]


def test_fit_devices_equals_the_command_line(monkeypatch):
    monkeypatch.chdir(ROOT)
    answer = jointplan.fit(model="models/llama-3.2-1b", layers=1, devices="models/devices")
    expected = cli_json("fit", "models/llama-3.2-1b", "--layers", "1", "--devices",
                        "models/devices", "--json")
    assert answer.to_dict() == expected
    assert answer.table()["device_file"] == [row["device_file"] for row in expected]


def test_fit_refuses_a_bad_knob_and_bad_combinations():
    with pytest.raises(jointplan.BadInput, match="scheduled-tokens"):
        jointplan.fit(model=LLAMA, maximize="speed")
    with pytest.raises(jointplan.BadInput, match="one of them"):
        jointplan.fit(model=LLAMA)
    with pytest.raises(jointplan.BadInput, match="model folder"):
        jointplan.fit(TINY, maximize="sequences", layers=2)


def test_the_memory_report_equals_the_summary_of_the_command_line():
    plan = jointplan.plan(model=LLAMA, layers=1)
    expected = cli_json("plan", "models/llama-3.2-1b", "--layers", "1", "--json")
    assert plan.report.to_dict() == expected["memory"]["report"]
    table = plan.report.table()
    assert dict(zip(table["item"], table["value"])) == expected["memory"]["report"]


def test_a_plan_the_command_line_refuses_is_returned_with_its_report():
    # The 8B model on the 24 GB device under the server policy: not one sequence fits.
    args = dict(model=ROOT / "models" / "llama-3.1-8b",
                device=ROOT / "models" / "devices" / "rtx-4090-24gb.json", policy="server")
    plan = jointplan.plan(**args, threads=1)
    assert plan.report["sequences_that_fit"] == 0
    assert not plan.report["worst_case_fits"]
    result = cli("plan", "models/llama-3.1-8b", "--device", "models/devices/rtx-4090-24gb.json",
                 "--policy", "server")
    assert result.returncode == 1
    assert "not even one sequence fits" in result.stderr
    assert f"weights {plan.report['weights_bytes']}" in result.stderr


def test_explain_is_the_command_lines_query_json_and_text(llama):
    request, path, _ = llama
    explanation = jointplan.explain(path, request)
    expected = cli_json("explain", str(path), "--request", str(request), "--json")
    answer = explanation.to_dict()
    assert answer.pop("why_not") is None
    assert answer == expected
    # The text is the command line's, trade-off included (Python had its own explain,
    # which had drifted: no trade-off, no closest ids).
    text = cli("explain", str(path), "--request", str(request)).stdout
    assert explanation.text() == text
    assert (explanation.kv_tradeoff is not None) == text.startswith("explain trade-off")
    # An id pattern selects what the summary's group line names.
    attention = jointplan.explain(path, node="node.layer.[0-0].attention")
    assert [n["node"] for n in attention.nodes] == ["node.layer.0.attention"]
    with pytest.raises(jointplan.BadInput, match="closest: node.layer.0.attention"):
        jointplan.explain(path, node="node.layer.0.atention")


def test_diff_text_is_the_command_lines(llama, tmp_path):
    request, path, _ = llama
    pinned = jointplan.plan(request, pins={"node.layer.0.attention": PAGED}, threads=1)
    pinned_path = tmp_path / "pinned.json"
    pinned_path.write_text(pinned.json())
    assert jointplan.diff(path, pinned_path).text() == cli("diff", str(path),
                                                           str(pinned_path)).stdout


def test_an_infeasible_plan_carries_its_core_and_relaxations():
    # The two attention nodes share the KV cache; these kernels accept no common profile.
    decoder = ROOT / "models" / "decoder-2layer" / "request.json"
    pins = {"node.layer.0.attention": "provider.cuda.causal_paged_attention.f16.flash",
            "node.layer.1.attention": "provider.cuda.causal_paged_attention.f16"}
    with pytest.raises(jointplan.Infeasible) as caught:
        jointplan.plan(decoder, pins=pins, threads=1)
    error = caught.value
    args = [arg for node, provider in pins.items() for arg in ("--pin", f"{node}={provider}")]
    result = cli("plan", str(decoder), *args, "--json")
    assert result.returncode == 1
    expected = json.loads(result.stdout)
    assert error.reason == expected
    assert len(error.core) == 4 and error.core == expected["core"]
    assert error.relaxations == expected["relaxations"]
    assert "facts of the request conflict" in error.message


def test_pins_and_forbids_take_id_patterns_as_the_command_line(llama):
    request, _, plan = llama
    one = jointplan.plan(request, pins={"node.layer.0.attention": PAGED}, threads=1)
    pattern = jointplan.plan(request, pins={"node.layer.[0-0].attention": PAGED}, threads=1)
    assert pattern.plan_id == one.plan_id
    assert pattern.plan_id == cli_json("plan", str(request), "--pin",
                                       f"node.layer.*.attention={PAGED}", "--json")["plan_id"]
    with pytest.raises(jointplan.BadInput, match="selects no node"):
        jointplan.plan(request, forbids={"node.layer.[5-9].attention": [PAGED]}, threads=1)
