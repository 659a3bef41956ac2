"""Sweeps from Python: a grid's points batched into tasks, planned on local threads, a
Dask cluster or Ray, and written to the same ``results.csv``, ``results.jsonl`` and SVG
plots as ``jointplan sweep`` (the files are written by the same Rust code).

Every row is keyed by the hash of its synthesized request and build settings. Rows are
appended batch by batch in grid order, so a sweep stopped at any point keeps its finished
batches; run again with ``resume=True`` it plans only the keys not yet in the directory.
:func:`merge` gathers the rows of several directories (shards, partial sweeps), first
row per key.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Union

from . import _native
from .errors import bad_input, call
from .executors import executor_for, task_rows
from .inputs import PathLike, PathOrDict, check_threads, json_text
from .table import Table

#: The report's figures, in the order of the results' columns.
REPORT_FIGURES = ("weights_bytes", "kv_bytes_per_token", "kv_bytes_per_sequence",
                  "activation_bytes", "workspace_bytes", "reserve_bytes", "headroom_bytes",
                  "tokens_that_fit", "sequences_that_fit", "worst_case_fits")


#: The time columns (a row's ``time``, where the grid gives a serving point), by key.
TIME_FIGURES = {"ttft_seconds": "ttft_seconds", "tpot_seconds": "tpot_seconds",
                "output_tokens_per_second": "output_tokens_per_second",
                "output_tokens_per_second_per_device": "output_tokens_per_second_per_device",
                "output_tokens_per_second_per_user": "output_tokens_per_second_per_user",
                "time_rule": "rule", "time_engine": "engine"}

#: The placement columns (a device-set row's ``placement``), by key.
PLACEMENT_FIGURES = {"placement_id": "placement_id",
                     "placed_tensor_parallel": "tensor_parallel",
                     "placed_pipeline_parallel": "pipeline_parallel",
                     "devices_used": "devices_used"}


def rows_table(rows: Sequence[Dict[str, Any]]) -> Table:
    """Sweep rows as a table with the columns of ``results.csv``, typed (numbers as
    numbers, ``None`` for an empty cell; ``providers`` space-separated as in the CSV;
    integer columns with gaps stay integers in pandas)."""
    names = _native.csv_columns()
    columns: Dict[str, List[Any]] = {name: [] for name in names}
    knobs = names[:names.index("key")]
    for row in rows:
        point = row["point"]
        for knob in knobs:
            columns[knob].append(point.get(knob))
        report = row.get("report") or {}
        time = row.get("time") or {}
        placement = row.get("placement") or {}
        for name in names[len(knobs):]:
            if name in REPORT_FIGURES:
                value = report.get(name)
            elif name in TIME_FIGURES:
                value = time.get(TIME_FIGURES[name])
            elif name in PLACEMENT_FIGURES:
                value = placement.get(PLACEMENT_FIGURES[name])
            elif name == "providers":
                value = " ".join(row["providers"])
            else:
                value = row.get(name)
            columns[name].append(value)
    return Table(columns)


@dataclass(frozen=True)
class SweepResult:
    """A results directory after a sweep: every row in it (first per key, file order),
    how many points the grid has and how many this call planned, and the plots drawn."""

    out_dir: Path
    points: int
    planned: int
    rows: List[Dict[str, Any]] = field(repr=False)
    plots: List[str] = field(default_factory=list)

    def table(self) -> Table:
        """The rows with the columns of ``results.csv``."""
        return rows_table(self.rows)

    def to_pandas(self):
        """The rows as a ``pandas.DataFrame`` (needs pandas)."""
        return self.table().to_pandas()

    def to_polars(self):
        """The rows as a ``polars.DataFrame`` (needs polars)."""
        return self.table().to_polars()

    def to_dict(self) -> Dict[str, Any]:
        """The result as plain data."""
        return {"out_dir": str(self.out_dir), "points": self.points,
                "planned": self.planned, "rows": self.rows, "plots": self.plots}


def _grid_text(grid: PathOrDict) -> str:
    return json_text(grid, "grid")


def _positive(name: str, value: Any) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise bad_input(f"{name} must be a positive integer")
    return value


def _prepare_dir(out_dir: PathLike, resume: bool) -> tuple:
    out = Path(out_dir)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise bad_input(f"{out}: cannot create: {error}", None, str(out)) from None
    existing = json.loads(call(_native.read_rows, str(out)))
    if existing and not resume:
        raise bad_input(f"{out} already holds {len(existing)} results (results.jsonl); pass "
                        "resume=True to skip them and add the rest, or another directory",
                        None, str(out))
    # Both files exist from the start (an empty part still concatenates).
    call(_native.append_rows, str(out), "[]")
    return out, {row["key"] for row in existing}


def _finish(out: Path, grid_text: str, points: int, planned: int) -> SweepResult:
    plots = call(_native.write_plots, str(out), grid_text)
    rows = json.loads(call(_native.read_rows, str(out)))
    return SweepResult(out_dir=out, points=points, planned=planned, rows=rows, plots=plots)


def sweep(grid: PathOrDict, out_dir: PathLike, *, executor: Any = "local",
          resume: bool = True, threads: int = 1, batch: int = 4,
          workers: Optional[int] = None,
          progress: Optional[Callable[[int, int], None]] = None) -> SweepResult:
    """Plans every point of ``grid`` (a grid file or dict, as ``jointplan sweep`` takes;
    relative paths in it are read from the current directory, wherever the workers run)
    into ``out_dir``.

    ``executor``: ``"local"`` (threads of this process), ``"dask"`` (a new local cluster
    of one in-process worker with ``workers`` threads: it works from a script without a
    ``__main__`` guard, a notebook or standard input), ``"ray"`` (``ray.init(num_cpus=workers)``
    unless Ray is already initialised), a ``dask.distributed.Client`` or the initialised
    ``ray`` module. Points go out in tasks of ``batch`` points, each plan on ``threads``
    threads; rows are written in grid order as tasks finish. ``resume``: skip the keys
    already in ``out_dir`` (without it, a directory with results is refused).
    ``progress(planned, points)`` is called after each task's rows are written; an
    exception it raises stops the sweep (the rows written so far stay).
    """
    check_threads(threads)
    _positive("threads", threads)
    _positive("batch", batch)
    grid_text = _grid_text(grid)
    listed = json.loads(call(_native.grid_points, grid_text))
    points = listed["points"]
    out, done = _prepare_dir(out_dir, resume)
    base = os.getcwd()
    known = sorted(done)
    tasks = [json.dumps({"points": points[i:i + batch], "base": base, "done": known,
                         "threads": threads}) for i in range(0, len(points), batch)]
    runner = executor_for(executor, workers, threads)
    planned = 0
    handles: List[Any] = []
    try:
        handles = [runner.submit(task) for task in tasks]
        for index, handle in enumerate(handles):
            rows = [row for row in task_rows(runner.result(handle)) if row["key"] not in done]
            done.update(row["key"] for row in rows)
            call(_native.append_rows, str(out), json.dumps(rows))
            planned += len(rows)
            if progress is not None:
                progress(planned, len(points))
            handles[index] = None
    except BaseException:
        runner.cancel([h for h in handles if h is not None])
        raise
    finally:
        runner.close()
    return _finish(out, grid_text, len(points), planned)


def merge(dirs: Sequence[PathLike], out_dir: PathLike, grid: PathOrDict, *,
          resume: bool = False) -> SweepResult:
    """Gathers the rows of several results directories (shards of ``jointplan sweep
    --shard``, partial sweeps) into ``out_dir``, in the order given, first row per key,
    and draws the plots on ``grid``'s axes (what ``jointplan sweep --merge`` does)."""
    grid_text = _grid_text(grid)
    listed = json.loads(call(_native.grid_points, grid_text))
    out, done = _prepare_dir(out_dir, resume)
    target = out.resolve()
    for source in dirs:
        if Path(source).resolve() == target:
            raise bad_input(f"{source}: this is the output directory; merge into another one")
    rows = json.loads(call(_native.merge_rows, [os.fspath(d) for d in dirs]))
    rows = [row for row in rows if row["key"] not in done]
    call(_native.append_rows, str(out), json.dumps(rows))
    return _finish(out, grid_text, len(listed["points"]), len(rows))
