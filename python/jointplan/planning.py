"""Planning: synthesize a request, build and verify a plan, solve a selection problem,
hash a document."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Union

from . import _native
from .errors import call
from .inputs import PathOrDict, json_text, options, request_or_source, serving, source
from .table import Table


@dataclass(frozen=True)
class MemoryReport:
    """A plan's memory in serving terms (what ``jointplan plan --json`` gives under
    ``memory.report``): weights, KV cache per token and per sequence, activations,
    workspaces, reserve, headroom, the tokens and sequences that fit, and whether the
    policy's worst case fits. ``limits`` are the ceilings it was computed at."""

    figures: Dict[str, Any]
    limits: Dict[str, Any] = field(default_factory=dict)

    def __getitem__(self, item: str) -> Any:
        return self.figures[item]

    def to_dict(self) -> Dict[str, Any]:
        """The report's figures, by name."""
        return dict(self.figures)

    def table(self) -> Table:
        """One row per figure (``item``, ``value``): ``report.table().to_pandas()``."""
        return Table({"item": list(self.figures), "value": list(self.figures.values())})


@dataclass(frozen=True)
class Plan:
    """A built (or verified) execution plan.

    ``payload`` is the plan's payload as a dict; ``components`` the selection's report per
    connected component (method and check: evidence, not hashed); ``report`` the memory
    report in serving terms; ``performance`` the prediction at the serving point, when one
    was given (what ``jointplan plan --concurrency C --input-tokens I --output-tokens O
    --json`` prints under ``performance``: ``ttft_seconds``, ``tpot_seconds``,
    ``output_tokens_per_second``, ``prefill``, ``decode_step``, ``by_kind``, ...)."""

    plan_id: str
    plan_hash: str
    payload: Dict[str, Any] = field(repr=False)
    components: List[Dict[str, Any]] = field(default_factory=list, repr=False)
    report: Optional[MemoryReport] = field(default=None, repr=False)
    performance: Optional[Dict[str, Any]] = field(default=None, repr=False)

    @classmethod
    def _from_native(cls, text: str) -> "Plan":
        data = json.loads(text)
        plan = data["plan"]
        return cls(plan_id=plan["payload"]["plan_id"], plan_hash=plan["plan_hash"],
                   payload=plan["payload"], components=data["components"],
                   report=MemoryReport(data["report"], data["limits"]),
                   performance=data.get("performance"))

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

    def nodes_table(self) -> Table:
        """One row per node: node, operation, provider, selection reason."""
        columns: Dict[str, List[Any]] = {"node": [], "operation": [], "provider": [],
                                         "selection_reason": []}
        for node in self.payload["nodes"]:
            columns["node"].append(node["id"])
            columns["operation"].append(node["operation_id"])
            columns["provider"].append(node["provider_resources"]["provider_id"])
            columns["selection_reason"].append(node["selection"]["selection_reason"])
        return Table(columns)


def plan_text(stored_plan: Union[PathOrDict, Plan]) -> str:
    """The JSON text of a stored plan given as a :class:`Plan`, a path or a dict."""
    if isinstance(stored_plan, Plan):
        return json.dumps(stored_plan.to_dict())
    return json_text(stored_plan, "plan")


@dataclass(frozen=True)
class Solution:
    """The answer to a selection problem (the output of ``jointplan solve``)."""

    status: str
    objective: str
    choices: Dict[str, str]
    profiles: Dict[str, str]
    raw: Dict[str, Any] = field(repr=False)

    def to_dict(self) -> Dict[str, Any]:
        """The solution as ``jointplan solve`` prints it."""
        return self.raw


def synth(model: Optional[Union[str, "os.PathLike[str]"]] = None, *, config=None, device=None,
          policy: Optional[str] = None, layers: Optional[int] = None,
          experts: Optional[int] = None, expert_group_size: Optional[int] = None,
          weight_format: Optional[str] = None) -> Dict[str, Any]:
    """The plan request synthesized from a model folder (``models/llama-3.1-8b``) or a
    ``config.json``, with the folder's defaults for whatever is not given."""
    text = source(model, config, device, policy, layers, experts, expert_group_size,
                  weight_format)
    return json.loads(call(_native.synth, text))


def plan(request: Optional[PathOrDict] = None, *, model=None, config=None, device=None,
         policy: Optional[str] = None, layers: Optional[int] = None,
         experts: Optional[int] = None, expert_group_size: Optional[int] = None,
         weight_format: Optional[str] = None, objective: Optional[str] = None,
         weights: Optional[Mapping[str, Any]] = None,
         pins: Optional[Mapping[str, str]] = None, forbids=None,
         node_limit: Optional[int] = None, time_limit: Optional[float] = None,
         allow_uncertified: bool = False, threads: Optional[int] = None,
         concurrency: Optional[int] = None, input_tokens: Optional[int] = None,
         output_tokens: Optional[int] = None, engine: Optional[str] = None,
         performance_device=None, calibration=None, lengths: Optional[str] = None) -> Plan:
    """Builds, checks and hashes the plan of a request (path or dict) or of a model
    folder (``model=``, with the synthesis choices as keywords). ``pins`` maps a node to
    the provider it must take and ``forbids`` a node to providers it must not (the
    command line's ``--pin`` and ``--forbid``; both are recorded in the plan).

    With a serving point (``concurrency``, ``input_tokens``, ``output_tokens``; ``engine``
    names the time profile, default ``vllm``; ``performance_device`` the device file that
    prices a request, a model folder's own otherwise) the plan carries ``performance``, as
    ``jointplan plan --concurrency ... --json``: a model folder's sequence ceiling is
    raised to the concurrency when lower, and ``objective="min-tpot"|"min-ttft"|
    "max-throughput"`` records the point in the plan. ``engine`` (``"vllm"``,
    ``"vllm@0.6"``, ...; a model folder only) also holds the plan to the engine's memory
    budget, as the command line's ``--engine``. ``lengths`` (``"fixed"``,
    ``"sglang[:R[:SEED]]"``, ``"vllm[:R]"``) draws the requests' lengths as a serving
    benchmark's random dataset does, as the command line's ``--lengths``."""
    point = serving(concurrency, input_tokens, output_tokens, engine, performance_device,
                    calibration, lengths=lengths)
    call_options = options(threads, objective, weights, node_limit, time_limit,
                           allow_uncertified, pins=pins, forbids=forbids, serving=point)
    request_json, source_json = request_or_source(
        request, model, config=config, device=device, policy=policy, layers=layers,
        experts=experts, expert_group_size=expert_group_size, weight_format=weight_format)
    return Plan._from_native(call(_native.plan, request_json, source_json, call_options))


def verify(request: Optional[PathOrDict], stored_plan: Union[PathOrDict, Plan], *, model=None,
           layers: Optional[int] = None, threads: Optional[int] = None,
           objective: Optional[str] = None,
           weights: Optional[Mapping[str, Any]] = None) -> str:
    """Verifies a stored plan (path, dict or :class:`Plan`) against its request (or
    ``model=``); returns the plan id, raises :class:`Rejected` naming the first differing
    field."""
    call_options = options(threads, objective, weights)
    request_json, source_json = request_or_source(request, model, layers=layers)
    return call(_native.verify, request_json, source_json, plan_text(stored_plan),
                call_options)


def solve(problem: PathOrDict, *, objective: str = "seed-lex",
          weights: Optional[Mapping[str, Any]] = None, node_limit: Optional[int] = None,
          time_limit: Optional[float] = None, threads: Optional[int] = None,
          timings: bool = True) -> Solution:
    """Solves a provider/storage-profile selection problem (the format of
    ``docs/selection-problem.md``) to its certified optimum under ``objective``."""
    call_options = options(threads, objective, weights, node_limit, time_limit, False, timings)
    raw = json.loads(call(_native.solve, json_text(problem, "problem"), call_options))
    return Solution(status=raw["status"], objective=raw["objective"], choices=raw["choices"],
                    profiles=raw["profiles"], raw=raw)


def canonical_hash(document: PathOrDict) -> str:
    """The canonical SHA-256 of a JSON document (what ``jointplan hash`` prints)."""
    return call(_native.canonical_hash, json_text(document, "document"))
