"""jointplan: verified execution plans for ML model graphs, from Python.

A thin, typed layer over the Rust library (the extension module ``jointplan._native``):
every call takes a request, a model folder, a plan or a grid (a path or a dict), releases
the GIL while Rust works, takes an explicit ``threads=`` count, and returns plain Python
data wrapped in small result classes with ``to_dict()``; result tables (sweep rows, diff
rows, a memory report) convert to pandas or polars DataFrames. Failures raise
:class:`BadInput`, :class:`Infeasible` or :class:`Rejected`, which carry the error's JSON
path and file.

>>> import jointplan
>>> plan = jointplan.plan(model="models/llama-3.2-1b", layers=2, threads=1)
>>> plan.plan_id.startswith("plan/sha256/")
True
"""

from .errors import BadInput, Infeasible, JointplanError, Rejected
from .planning import (MemoryReport, Plan, Solution, canonical_hash, plan, solve, synth,
                       verify)
from .research import (CheckReport, DeviceFits, Explanation, FitResult, PlanDiff, check, diff,
                       explain, fit)
from .sweep import SweepResult, merge, rows_table, sweep
from .table import Table

__all__ = [
    "JointplanError", "BadInput", "Infeasible", "Rejected",
    "Plan", "MemoryReport", "Solution", "CheckReport", "Explanation", "PlanDiff",
    "FitResult", "DeviceFits", "SweepResult", "Table",
    "synth", "plan", "verify", "solve", "canonical_hash",
    "check", "explain", "diff", "fit", "sweep", "merge", "rows_table",
]
