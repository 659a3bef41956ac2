"""Sweeps from Python: the same rows and files as `jointplan sweep` on the local
executor, on a local Dask cluster and on local Ray; resume after an interrupted sweep;
merges; result tables as DataFrames; errors."""

import json

import pytest

import jointplan
from conftest import ROOT, cli, cli_json, without_timing

# 3 contexts x 2 view orders x 2 sequence counts of a one-layer model: 12 points.
GRID = {
    "model": ["models/llama-3.2-1b"],
    "layers": [1],
    "context": [512, 2048, 8192],
    "sequences": [4, 8],
    "storage_views": [["contiguous", "paged"], ["paged", "contiguous"]],
}
POINTS = 12


@pytest.fixture(autouse=True)
def in_the_repository(monkeypatch):
    # The grid's paths are relative to the repository, as the command line reads them.
    monkeypatch.chdir(ROOT)


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The grid swept by the command line: its directory and rows."""
    dir = tmp_path_factory.mktemp("cli")
    grid = dir / "grid.json"
    grid.write_text(json.dumps(GRID))
    out = dir / "out"
    result = cli("sweep", str(grid), "-o", str(out), "--jobs", "1")
    assert result.returncode == 0, result.stderr
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert len(rows) == POINTS
    return out, rows


def csv_without_timing(path):
    lines = path.read_text().splitlines()
    column = lines[0].split(",").index("plan_seconds")
    masked = []
    for line in lines:
        assert '"' not in line, line
        fields = line.split(",")
        if fields[column] != "plan_seconds":
            fields[column] = ""
        masked.append(fields)
    return masked


def test_the_local_executor_writes_the_command_lines_files(reference, tmp_path):
    cli_out, cli_rows = reference
    result = jointplan.sweep(GRID, tmp_path, executor="local", workers=2, batch=5)
    assert (result.points, result.planned) == (POINTS, POINTS)
    assert without_timing(result.rows) == without_timing(cli_rows)
    assert csv_without_timing(tmp_path / "results.csv") == csv_without_timing(
        cli_out / "results.csv")
    assert sorted(result.plots) == sorted(p.name for p in cli_out.glob("*.svg"))
    for plot in result.plots:
        assert (tmp_path / plot).read_text().startswith("<svg")


def test_a_local_dask_cluster_gives_the_same_rows(reference, tmp_path):
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster:
        with distributed.Client(cluster) as client:
            result = jointplan.sweep(GRID, tmp_path / "client", executor=client, batch=3)
    assert without_timing(result.rows) == without_timing(reference[1])
    # executor="dask" starts (and closes) a cluster of its own.
    owned = jointplan.sweep(GRID, tmp_path / "owned", executor="dask", workers=2, batch=5)
    assert without_timing(owned.rows) == without_timing(reference[1])


def test_local_ray_gives_the_same_rows(reference, tmp_path):
    ray = pytest.importorskip("ray", reason="ray has no wheel for this Python or platform")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        result = jointplan.sweep(GRID, tmp_path, executor=ray, batch=3)
    finally:
        ray.shutdown()
    assert without_timing(result.rows) == without_timing(reference[1])


# A sweep as a user types it: no `if __name__ == "__main__"` guard, so a worker process that
# re-imported `__main__` would start the sweep again (or fail, reading standard input).
UNGUARDED = """
import json, sys
import jointplan
grid = json.loads(sys.argv[1])
result = jointplan.sweep(grid, sys.argv[2], executor=EXECUTOR, workers=2, batch=5)
print("rows", len(result.rows))
"""


@pytest.mark.parametrize("executor", ["dask", "ray"])
@pytest.mark.parametrize("how", ["script", "stdin"])
def test_a_sweep_runs_from_an_unguarded_script_and_from_standard_input(
        reference, tmp_path, executor, how):
    pytest.importorskip("distributed" if executor == "dask" else "ray")
    import subprocess
    import sys
    source = UNGUARDED.replace("EXECUTOR", repr(executor))
    out = tmp_path / "out"
    args = [json.dumps(GRID), str(out)]
    if how == "script":
        script = tmp_path / "sweep_script.py"
        script.write_text(source)
        run = subprocess.run([sys.executable, str(script), *args], cwd=ROOT,
                             capture_output=True, text=True, timeout=300)
    else:
        run = subprocess.run([sys.executable, "-", *args], input=source, cwd=ROOT,
                             capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    # The sweep ran once: one "rows" line, and the files hold each point once.
    assert run.stdout.splitlines().count(f"rows {POINTS}") == 1, run.stdout
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert without_timing(rows) == without_timing(reference[1])


class Stop(Exception):
    pass


def test_an_interrupted_sweep_resumes_where_it_stopped(reference, tmp_path):
    def stop_after_five(planned, points):
        if planned >= 5:
            raise Stop

    with pytest.raises(Stop):
        jointplan.sweep(GRID, tmp_path, workers=1, batch=1, progress=stop_after_five)
    kept = [json.loads(line) for line in (tmp_path / "results.jsonl").read_text().splitlines()]
    assert len(kept) == 5
    # Without resume a directory with results is refused; with it, only the rest is planned.
    with pytest.raises(jointplan.BadInput, match="resume"):
        jointplan.sweep(GRID, tmp_path, resume=False)
    seen = []
    result = jointplan.sweep(GRID, tmp_path, resume=True, batch=4,
                             progress=lambda planned, points: seen.append(planned))
    assert result.planned == POINTS - 5
    assert seen[-1] == POINTS - 5
    assert without_timing(result.rows) == without_timing(reference[1])
    again = jointplan.sweep(GRID, tmp_path)
    assert again.planned == 0 and len(again.rows) == POINTS


def test_shards_and_partial_sweeps_merge_into_the_whole(reference, tmp_path):
    grid = tmp_path / "grid.json"
    grid.write_text(json.dumps(GRID))
    shards = []
    for index in range(3):
        out = tmp_path / f"shard-{index}"
        result = cli("sweep", str(grid), "-o", str(out), "--shard", f"{index}/3", "--jobs", "1")
        assert result.returncode == 0, result.stderr
        shards.append(out)
    merged = jointplan.merge(shards, tmp_path / "merged", grid)
    assert merged.planned == POINTS
    assert without_timing(merged.rows) == without_timing(reference[1])
    # A partial Python sweep (shard 0's rows) completed by a resume of the whole grid.
    partial = jointplan.merge(shards[:1], tmp_path / "partial", GRID)
    completed = jointplan.sweep(GRID, tmp_path / "partial")
    assert completed.planned == POINTS - partial.planned
    assert without_timing(completed.rows) == without_timing(reference[1])
    with pytest.raises(jointplan.BadInput, match="output directory"):
        jointplan.merge([tmp_path / "merged"], tmp_path / "merged", GRID, resume=True)
    with pytest.raises(jointplan.BadInput, match="results.jsonl"):
        jointplan.merge([tmp_path / "nothing"], tmp_path / "other", GRID)


def test_rows_convert_to_pandas_and_polars(reference, tmp_path):
    result = jointplan.sweep(GRID, tmp_path, workers=2)
    table = result.table()
    header = (reference[0] / "results.csv").read_text().splitlines()[0].split(",")
    assert list(table.columns) == header
    assert len(table) == POINTS
    pandas = pytest.importorskip("pandas")
    frame = result.to_pandas()
    assert list(frame.columns) == header
    assert frame["context"].tolist() == table["context"]
    assert isinstance(pandas.DataFrame, type)
    pytest.importorskip("polars")
    polars_frame = result.to_polars()
    assert polars_frame.columns == header
    assert polars_frame["tokens_that_fit"].to_list() == table["tokens_that_fit"]


def test_bad_sweeps_are_bad_input(tmp_path):
    with pytest.raises(jointplan.BadInput, match="not a grid"):
        jointplan.sweep({"model": ["models/llama-3.2-1b"], "speed": [1]}, tmp_path)
    with pytest.raises(jointplan.BadInput, match="grid.model"):
        jointplan.sweep({"model": []}, tmp_path)
    with pytest.raises(jointplan.BadInput, match="executor"):
        jointplan.sweep(GRID, tmp_path, executor="slurm")
    with pytest.raises(jointplan.BadInput, match="threads"):
        jointplan.sweep(GRID, tmp_path, threads=0)
    with pytest.raises(jointplan.BadInput, match="batch"):
        jointplan.sweep(GRID, tmp_path, batch=0)
    # A point that cannot be synthesized is an error row naming the model folder; the
    # sweep goes on with the next point (the command line's rule, the same library code).
    result = jointplan.sweep({"model": ["models/missing", "models/llama-3.2-1b"],
                              "layers": [1]}, tmp_path / "missing")
    assert [row["status"] for row in result.rows] == ["error", "fits"]
    assert "models/missing" in result.rows[0]["reason"]
    assert result.table().to_dict()["status"] == ["error", "fits"]


def test_a_capped_context_keeps_its_row_and_the_value_used(tmp_path):
    # phi-3-mini is trained for 4096 positions: 8192 and 32768 plan at 4096, each its row.
    grid = {"model": ["models/phi-3-mini"], "layers": [1], "context": [4096, 8192, 32768]}
    result = jointplan.sweep(grid, tmp_path)
    assert [row["point"]["context"] for row in result.rows] == [4096, 8192, 32768]
    assert [row["context_used"] for row in result.rows] == [4096, 4096, 4096]
    assert len({row["plan_id"] for row in result.rows}) == 1


def test_time_columns_and_device_sets_reach_the_table_typed(tmp_path):
    # One device and a device set with two tensor-parallel degrees (3 fails: an error
    # row), at one serving point: every planned row carries its times and the rule.
    grid = {"model": ["models/llama-3.1-8b"], "layers": [2], "context": [4096],
            "devices": ["models/devices/sets/a100-80gb-x2.json"],
            "tensor_parallel": [1, 3, 2], "concurrency": [2], "input_tokens": [128],
            "output_tokens": [16]}
    result = jointplan.sweep(grid, tmp_path)
    table = result.table()
    assert table["status"][0] == "fits" and table["status"][2] == "fits"
    assert table["status"][1] != "fits"
    for name in ("ttft_seconds", "tpot_seconds", "output_tokens_per_second",
                 "output_tokens_per_second_per_device", "output_tokens_per_second_per_user"):
        column = table[name]
        assert isinstance(column[0], float) and column[1] is None, (name, column)
    assert table["placed_tensor_parallel"] == [1, None, 2]
    assert table["time_rule"] == ["placement-timing", None, "placement-timing"]
    assert "pareto.svg" in result.plots
    pandas = pytest.importorskip("pandas")
    frame = result.to_pandas()
    # An integer column with a gap stays integers.
    assert str(frame["placed_tensor_parallel"].dtype) == "Int64"
    assert str(frame["devices_used"].dtype) == "Int64"
    assert frame["tpot_seconds"].dtype == "float64"
    assert isinstance(pandas.DataFrame, type)


def test_engine_knob_plans_as_plan_engine_does(tmp_path):
    # The grid's `engine` reaches the same library code as `jointplan sweep` and `plan
    # --engine`: each row's plan, memory report and engine budget are `plan --engine E`'s,
    # its times those of the engine's time profile (the version's own where it has one:
    # vllm@0.6, the V0 engine's scheduler and host time).
    grid = {"model": ["models/llama-3.2-1b"], "layers": [2], "context": [4096],
            "device": ["models/devices/h100-sxm-80gb.json"],
            "engine": ["vllm@0.6", "sglang", "llama.cpp"], "concurrency": [2],
            "input_tokens": [64], "output_tokens": [8]}
    result = jointplan.sweep(grid, tmp_path / "py")
    assert [row["point"]["engine"] for row in result.rows] == grid["engine"]
    for row in result.rows:
        engine = row["point"]["engine"]
        plan = cli_json("plan", "models/llama-3.2-1b", "--layers", "2", "--context", "4096",
                        "--device", "models/devices/h100-sxm-80gb.json", "--engine", engine,
                        "--concurrency", "2", "--input-tokens", "64", "--output-tokens", "8",
                        "--json")
        assert row["plan_id"] == plan["plan_id"], engine
        assert row["report"] == plan["memory"]["report"], engine
        assert row["engine_budget"] == plan["engine_budget"], engine
        # The rows are read back from results.jsonl by the library, whose JSON parser
        # reads every float back exactly (serde_json's `float_roundtrip`).
        for key in ("ttft_seconds", "tpot_seconds", "output_tokens_per_second_per_device"):
            assert row["time"][key] == plan["performance"][key], (engine, key)
        assert row["time"]["engine"] == engine
    table = result.table()
    assert table["engine"] == grid["engine"]
    assert table["time_engine"] == ["vllm@0.6", "sglang", "llama.cpp"]
    assert len(set(table["plan_id"])) == 3
    # The command line's sweep of the same grid writes the same rows.
    file = tmp_path / "grid.json"
    file.write_text(json.dumps(grid))
    out = tmp_path / "cli"
    done = cli("sweep", str(file), "-o", str(out), "--jobs", "1")
    assert done.returncode == 0, done.stderr
    merged = jointplan.merge([out], tmp_path / "merged", grid)
    assert without_timing(result.rows) == without_timing(merged.rows)


def test_a_bad_engine_is_bad_input_naming_the_key(tmp_path):
    grid = {"model": ["models/llama-3.2-1b"], "layers": [2], "engine": ["vllm", "tgi"]}
    with pytest.raises(jointplan.BadInput, match=r"grid\.engine\[1\].*\"tgi\".*accepted: vllm"):
        jointplan.sweep(grid, tmp_path)
    assert not (tmp_path / "results.jsonl").exists()
