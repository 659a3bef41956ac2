"""jointplan: verified execution plans for ML model graphs, from Python.

A thin, typed layer over the Rust library (the extension module ``jointplan._native``):
every call takes a request, a model folder or a selection problem (a path or a dict),
releases the GIL while Rust works, takes an explicit ``threads=`` count, and returns plain
Python data wrapped in small result classes with ``to_dict()``. Failures raise
:class:`BadInput`, :class:`Infeasible` or :class:`Rejected`, which carry the error's JSON
path and file.

>>> import jointplan
>>> plan = jointplan.plan(model="models/llama-3.2-1b", layers=2, threads=1)
>>> plan.plan_id.startswith("plan/sha256/")
True
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Union

from . import _native

__all__ = [
    "JointplanError",
    "BadInput",
    "Infeasible",
    "Rejected",
    "Plan",
    "Solution",
    "synth",
    "plan",
    "verify",
    "solve",
    "canonical_hash",
]

PathOrDict = Union[str, "os.PathLike[str]", Mapping[str, Any]]


class JointplanError(Exception):
    """A jointplan failure: ``kind`` is ``bad_input``, ``infeasible``, ``rejected`` or
    ``internal``; ``path`` is the JSON path of the culprit and ``file`` its file, where
    known."""

    def __init__(self, kind: str, message: str, path: Optional[str] = None,
                 file: Optional[str] = None):
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.path = path
        self.file = file


class BadInput(JointplanError):
    """The input is malformed or inconsistent (the command line's exit status 2)."""


class Infeasible(JointplanError):
    """The input is well formed but no plan satisfies it (exit status 1)."""


class Rejected(JointplanError):
    """A stored plan was rejected by verification (exit status 1)."""


_KINDS = {"bad_input": BadInput, "infeasible": Infeasible, "rejected": Rejected}


def _call(function, *args):
    try:
        return function(*args)
    except _native.NativeError as error:
        kind, message, path, file = error.args[0] if len(error.args) == 1 else error.args
        raise _KINDS.get(kind, JointplanError)(kind, message, path, file) from None


def _json_text(value: PathOrDict, what: str) -> str:
    """JSON text of a path (read as is: the Rust reader checks it) or of a dict."""
    if isinstance(value, Mapping):
        return json.dumps(value)
    if isinstance(value, (str, os.PathLike)):
        try:
            return Path(value).read_text(encoding="utf-8")
        except OSError as error:
            raise BadInput("bad_input", f"{value}: cannot read the {what}: {error}",
                           None, str(value)) from None
    raise TypeError(f"{what}: expected a path or a dict, not {type(value).__name__}")


def _options(threads: Optional[int], objective: Optional[str],
             weights: Optional[Mapping[str, Any]], node_limit: Optional[int],
             time_limit: Optional[float], allow_uncertified: bool,
             timings: bool = True) -> str:
    if threads is not None and (not isinstance(threads, int) or threads < 1):
        raise BadInput("bad_input", "threads must be a positive integer")
    return json.dumps({
        "threads": threads,
        "objective": objective,
        "weights": dict(weights) if weights is not None else None,
        "node_limit": node_limit,
        "time_limit": time_limit,
        "allow_uncertified": allow_uncertified,
        "timings": timings,
    })


def _source(model, config, device, policy, layers, experts, expert_group_size,
            weight_format) -> str:
    def text(p):
        return None if p is None else os.fspath(p)
    return json.dumps({
        "model": text(model),
        "config": text(config),
        "device": text(device),
        "policy": None if policy is None else (
            policy if policy in ("interactive", "server") else os.fspath(policy)),
        "layers": layers,
        "experts": experts,
        "expert_group_size": expert_group_size,
        "weight_format": weight_format,
    })


@dataclass(frozen=True)
class Plan:
    """A built (or verified) execution plan.

    ``payload`` is the plan's payload as a dict; ``components`` the selection's report per
    connected component (method and check: evidence, not hashed)."""

    plan_id: str
    plan_hash: str
    payload: Dict[str, Any] = field(repr=False)
    components: List[Dict[str, Any]] = field(default_factory=list, repr=False)

    @classmethod
    def _from_native(cls, text: str) -> "Plan":
        data = json.loads(text)
        plan = data["plan"]
        return cls(plan_id=plan["payload"]["plan_id"], plan_hash=plan["plan_hash"],
                   payload=plan["payload"], components=data["components"])

    def to_dict(self) -> Dict[str, Any]:
        """The plan file's content: ``{"payload": ..., "plan_hash": ...}``."""
        return {"payload": self.payload, "plan_hash": self.plan_hash}

    def json(self) -> str:
        """The plan file's JSON text (pretty, fields in the plan's order): what
        ``jointplan plan -o`` writes, and what :func:`verify` and ``jointplan verify`` read."""
        return json.dumps(self.to_dict(), indent=2) + "\n"

    def providers(self) -> Dict[str, str]:
        """The chosen provider of every node, by node id."""
        return {node["id"]: node["provider_resources"]["provider_id"]
                for node in self.payload["nodes"]}

    def nodes_table(self) -> Dict[str, List[Any]]:
        """One row per node as plain columns (``pandas.DataFrame(plan.nodes_table())``)."""
        columns: Dict[str, List[Any]] = {"node": [], "operation": [], "provider": [],
                                         "selection_reason": []}
        for node in self.payload["nodes"]:
            columns["node"].append(node["id"])
            columns["operation"].append(node["operation_id"])
            columns["provider"].append(node["provider_resources"]["provider_id"])
            columns["selection_reason"].append(node["selection"]["selection_reason"])
        return columns


@dataclass(frozen=True)
class Solution:
    """The answer to a selection problem (the output of ``jointplan solve``)."""

    status: str
    objective: str
    choices: Dict[str, str]
    profiles: Dict[str, str]
    raw: Dict[str, Any] = field(repr=False)

    def to_dict(self) -> Dict[str, Any]:
        return self.raw


def synth(model: Optional[Union[str, "os.PathLike[str]"]] = None, *, config=None, device=None,
          policy: Optional[str] = None, layers: Optional[int] = None,
          experts: Optional[int] = None, expert_group_size: Optional[int] = None,
          weight_format: Optional[str] = None) -> Dict[str, Any]:
    """The plan request synthesized from a model folder (``models/llama-3.1-8b``) or a
    ``config.json``, with the folder's defaults for whatever is not given."""
    source = _source(model, config, device, policy, layers, experts, expert_group_size,
                     weight_format)
    return json.loads(_call(_native.synth, source))


def plan(request: Optional[PathOrDict] = None, *, model=None, config=None, device=None,
         policy: Optional[str] = None, layers: Optional[int] = None,
         experts: Optional[int] = None, expert_group_size: Optional[int] = None,
         weight_format: Optional[str] = None, objective: Optional[str] = None,
         weights: Optional[Mapping[str, Any]] = None, node_limit: Optional[int] = None,
         time_limit: Optional[float] = None, allow_uncertified: bool = False,
         threads: Optional[int] = None) -> Plan:
    """Builds, checks and hashes the plan of a request (path or dict) or of a model
    folder (``model=``, with the synthesis choices as keywords)."""
    options = _options(threads, objective, weights, node_limit, time_limit, allow_uncertified)
    if request is not None:
        text = _call(_native.plan, _json_text(request, "request"), None, options)
    else:
        source = _source(model, config, device, policy, layers, experts, expert_group_size,
                         weight_format)
        text = _call(_native.plan, None, source, options)
    return Plan._from_native(text)


def verify(request: Optional[PathOrDict], stored_plan: Union[PathOrDict, Plan], *, model=None,
           layers: Optional[int] = None, threads: Optional[int] = None,
           objective: Optional[str] = None,
           weights: Optional[Mapping[str, Any]] = None) -> str:
    """Verifies a stored plan (path, dict or :class:`Plan`) against its request (or
    ``model=``); returns the plan id, raises :class:`Rejected` naming the first differing
    field."""
    if isinstance(stored_plan, Plan):
        plan_text = json.dumps(stored_plan.to_dict())
    else:
        plan_text = _json_text(stored_plan, "plan")
    options = _options(threads, objective, weights, None, None, False)
    if request is not None:
        return _call(_native.verify, _json_text(request, "request"), None, plan_text, options)
    source = _source(model, None, None, None, layers, None, None, None)
    return _call(_native.verify, None, source, plan_text, options)


def solve(problem: PathOrDict, *, objective: str = "seed-lex",
          weights: Optional[Mapping[str, Any]] = None, node_limit: Optional[int] = None,
          time_limit: Optional[float] = None, threads: Optional[int] = None,
          timings: bool = True) -> Solution:
    """Solves a provider/storage-profile selection problem (the format of
    ``docs/selection-problem.md``) to its certified optimum under ``objective``."""
    options = _options(threads, objective, weights, node_limit, time_limit, False, timings)
    raw = json.loads(_call(_native.solve, _json_text(problem, "problem"), options))
    return Solution(status=raw["status"], objective=raw["objective"], choices=raw["choices"],
                    profiles=raw["profiles"], raw=raw)


def canonical_hash(document: PathOrDict) -> str:
    """The canonical SHA-256 of a JSON document (what ``jointplan hash`` prints)."""
    return _call(_native.canonical_hash, _json_text(document, "document"))
