"""The Python API against the command line on the shipped models, and its errors."""

import json
import threading

import pytest

import jointplan
from conftest import ROOT, cli, cli_json

TINY = ROOT / "models" / "tiny" / "request.json"
SPEC = ROOT / "tests" / "data" / "spec-example.json"


@pytest.mark.parametrize("request_file", sorted((ROOT / "models").glob("*/request.json")))
def test_plan_ids_equal_the_command_line(request_file):
    plan = jointplan.plan(request_file, threads=1)
    assert plan.plan_id == cli_json("plan", str(request_file), "--json")["plan_id"]


def test_a_model_folder_plans_like_the_command_line():
    plan = jointplan.plan(model=ROOT / "models" / "llama-3.2-1b", layers=2, threads=1)
    expected = cli_json("plan", "models/llama-3.2-1b", "--layers", "2", "--json")["plan_id"]
    assert plan.plan_id == expected
    assert len(plan.providers()) == len(plan.payload["nodes"])
    table = plan.nodes_table()
    assert table["node"] == [node["id"] for node in plan.payload["nodes"]]


def test_synth_gives_the_request_the_command_line_writes(tmp_path):
    request = jointplan.synth(ROOT / "models" / "llama-3.2-1b", layers=1)
    out = tmp_path / "request.json"
    result = cli("synth", "--model", "models/llama-3.2-1b", "--layers", "1", "-o", str(out))
    assert result.returncode == 0, result.stderr
    assert jointplan.canonical_hash(request) == jointplan.canonical_hash(out)
    # The synthesized dict plans like the folder.
    assert jointplan.plan(request).plan_id == jointplan.plan(
        model=ROOT / "models" / "llama-3.2-1b", layers=1).plan_id


def test_thread_counts_give_identical_plans():
    one = jointplan.plan(model=ROOT / "models" / "mixtral-8x7b", layers=2, experts=4, threads=1)
    two = jointplan.plan(model=ROOT / "models" / "mixtral-8x7b", layers=2, experts=4, threads=2)
    assert one.json() == two.json()


def test_a_plan_round_trips_through_its_file_and_verifies(tmp_path):
    plan = jointplan.plan(TINY)
    path = tmp_path / "plan.json"
    path.write_text(plan.json())
    assert jointplan.verify(TINY, path) == plan.plan_id
    result = cli("verify", str(TINY), str(path))
    assert result.returncode == 0, result.stderr


def test_a_tampered_plan_is_rejected_with_its_path():
    plan = jointplan.plan(TINY).to_dict()
    plan["payload"]["device_id"] = "device.evil.0"
    with pytest.raises(jointplan.Rejected) as caught:
        jointplan.verify(TINY, plan)
    assert caught.value.kind == "rejected"
    assert caught.value.path == "payload.device_id"


def test_bad_input_names_the_file_and_the_path(tmp_path):
    broken = json.loads(TINY.read_text())
    broken["policy"]["maximum_active_sequences"] = "many"
    path = tmp_path / "broken.json"
    path.write_text(json.dumps(broken))
    with pytest.raises(jointplan.BadInput) as caught:
        jointplan.plan(path)
    assert caught.value.path == "policy.maximum_active_sequences"
    with pytest.raises(jointplan.BadInput):
        jointplan.plan(tmp_path / "missing.json")
    with pytest.raises(jointplan.BadInput):
        jointplan.plan(TINY, objective="fastest")
    with pytest.raises(jointplan.BadInput):
        jointplan.plan(TINY, threads=0)
    with pytest.raises(TypeError):
        jointplan.plan(42)


def test_solve_equals_the_command_line():
    solution = jointplan.solve(SPEC, timings=False)
    expected = cli_json("solve", str(SPEC))
    assert solution.choices == expected["choices"]
    assert solution.profiles == expected["profiles"]
    assert solution.status == "optimal"
    for objective in ("max-preferred", "min-penalty"):
        assert jointplan.solve(SPEC, objective=objective).choices == cli_json(
            "solve", str(SPEC), "--objective", objective)["choices"]


def test_an_infeasible_problem_raises_infeasible():
    problem = {"profiles": ["contiguous", "paged"], "nodes": [
        {"id": "a", "candidates": [{"provider": "x", "accepts": {"kv": ["contiguous"]}}]},
        {"id": "b", "candidates": [{"provider": "y", "accepts": {"kv": ["paged"]}}]},
    ]}
    with pytest.raises(jointplan.Infeasible) as caught:
        jointplan.solve(problem)
    assert "kv" in str(caught.value)


def test_plans_run_side_by_side_in_python_threads():
    # The GIL is released while Rust plans: two threads, each with one Rust thread, finish
    # with the same answer as a plan made alone.
    results = {}

    def work(name):
        results[name] = jointplan.plan(model=ROOT / "models" / "llama-3.2-1b", layers=2,
                                       threads=1).plan_id

    threads = [threading.Thread(target=work, args=(n,)) for n in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    alone = jointplan.plan(model=ROOT / "models" / "llama-3.2-1b", layers=2).plan_id
    assert results == {"a": alone, "b": alone}


def test_a_model_folder_as_the_first_argument_plans_like_the_command_line():
    folder = ROOT / "models" / "llama-3.2-1b"
    plan = jointplan.plan(str(folder), layers=2, threads=1)
    expected = cli_json("plan", "models/llama-3.2-1b", "--layers", "2", "--json")
    assert plan.plan_id == expected["plan_id"]
    assert jointplan.plan(folder, layers=2, threads=1).plan_id == plan.plan_id


def test_integer_columns_with_gaps_stay_nullable_integers():
    pandas = pytest.importorskip("pandas")
    big = 2**53 + 1
    frame = jointplan.Table({"bytes": [big, None, 3], "name": ["a", None, "c"],
                             "fits": [True, None, False]}).to_pandas()
    assert str(frame["bytes"].dtype) == "Int64"
    assert frame["bytes"][0] == big
    assert pandas.isna(frame["bytes"][1])
    # Text stays text: object before pandas 3, its string dtype from pandas 3 on.
    assert pandas.api.types.is_string_dtype(frame["name"].dtype) or frame["name"].dtype == object
    assert pandas.isna(frame["name"][1])
