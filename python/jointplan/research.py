"""Questions asked of plans: the independent checker, why each provider was chosen or
passed over (and what forcing another would cost), the semantic diff of two plans, and
fit (the largest value of a policy knob that fits, or which devices fit)."""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Union

from . import _native
from .errors import bad_input, call
from .inputs import PathOrDict, json_text, options, request_or_source, serving, source
from .planning import Plan, plan_text
from .table import Table

StoredPlan = Union[PathOrDict, Plan]


@dataclass(frozen=True)
class CheckReport:
    """The independent checker's verdict on a plan (``jointplan check --json``)."""

    plan_id: str
    valid: bool
    violations: List[Dict[str, Any]]

    def to_dict(self) -> Dict[str, Any]:
        """The report as ``jointplan check --json`` prints it."""
        return {"plan_id": self.plan_id, "valid": self.valid, "violations": self.violations}

    def table(self) -> Table:
        """One row per violation: rule, JSON path, message."""
        return Table({name: [v.get(name) for v in self.violations]
                      for name in ("rule", "json_path", "message")})


def check(stored_plan: StoredPlan) -> CheckReport:
    """Runs the independent checker on a stored plan alone (no request): every violation
    of the rules of a valid plan, with its rule and JSON path."""
    raw = json.loads(call(_native.check, plan_text(stored_plan)))
    return CheckReport(plan_id=raw["plan_id"], valid=raw["valid"],
                       violations=raw["violations"])


@dataclass(frozen=True)
class Explanation:
    """Why each node's provider was chosen (``jointplan explain --json``, the same native
    query): per node, the plan's selection record (requested, selected, reason, every
    rejected provider with its typed evidence), the profiles of the resources it names,
    what each resource is to the node and, when the request was given, what providers
    rejected for storage accept and the providers the plan passed over (``alternatives``;
    ``dropped``: why one was removed before selection). ``kv_tradeoff`` is the
    contiguous-versus-paged KV trade-off, when there is one; ``why_not`` the answer to a
    ``why_not=(node, provider)`` question (``jointplan explain --why-not --json``).
    :meth:`text` is what ``jointplan explain`` prints."""

    plan_id: str
    nodes: List[Dict[str, Any]]
    kv_tradeoff: Optional[Dict[str, Any]] = field(default=None)
    why_not: Optional[Dict[str, Any]] = field(default=None)
    _text: str = field(default="", repr=False)

    def to_dict(self) -> Dict[str, Any]:
        """The explanation as ``jointplan explain --json`` prints it, with ``why_not``."""
        return {"plan_id": self.plan_id, "kv_tradeoff": self.kv_tradeoff, "nodes": self.nodes,
                "why_not": self.why_not}

    def text(self) -> str:
        """The explanation as ``jointplan explain`` prints it (the why-not answer as
        ``jointplan explain --why-not`` prints it, when one was asked)."""
        return self._text

    def table(self) -> Table:
        """One row per node: node, selected provider, reason, rejected and passed-over
        provider counts (``None`` without the request)."""
        return Table({
            "node": [n["node"] for n in self.nodes],
            "selected": [n["selection"]["selected_provider"] for n in self.nodes],
            "selection_reason": [n["selection"]["selection_reason"] for n in self.nodes],
            "rejected": [len(n["selection"]["rejected_providers"]) for n in self.nodes],
            "passed_over": [None if n["alternatives"] is None else len(n["alternatives"])
                            for n in self.nodes],
        })


def explain(stored_plan: StoredPlan, request: Optional[PathOrDict] = None, *, model=None,
            layers: Optional[int] = None, node: Optional[str] = None,
            why_not: Optional[Union[str, tuple]] = None,
            threads: Optional[int] = None, concurrency: Optional[int] = None,
            input_tokens: Optional[int] = None, output_tokens: Optional[int] = None,
            engine: Optional[str] = None, performance_device=None,
            calibration=None) -> Explanation:
    """Explains a plan's choices (``node``: an id, or an id pattern as summaries print it,
    ``node.layer.[0-31].attention``); with its request (or ``model=``), also the providers
    the plan passed over and the KV trade-off, and ``why_not=(NODE, PROVIDER)`` (or
    ``"NODE=PROVIDER"``) re-solves with the pin and says which objective key gets worse and
    what changes, or why there is no plan. The answer is the command line's: both call the
    library's ``study::explain``. The why-not answer is priced (``diff.time``: TTFT, TPOT,
    tokens/s of both plans, and each provider change's prefill and decode-step time) at the
    serving point given (``concurrency``, ``input_tokens``, ``output_tokens``, ``engine``,
    ``performance_device``), else at the one the plan recorded."""
    point = serving(concurrency, input_tokens, output_tokens, engine, performance_device,
                    calibration)
    if point is not None and why_not is None:
        raise bad_input("concurrency= prices the answer of why_not=: give why_not=")
    text = plan_text(stored_plan)
    have_request = request is not None or model is not None
    request_json = source_json = None
    if have_request:
        request_json, source_json = request_or_source(request, model, layers=layers)
    raw = json.loads(call(_native.explain, text, request_json, source_json, node))
    answer, shown = raw["answer"], raw["text"]
    why = None
    if why_not is not None:
        if not have_request:
            raise bad_input("why_not re-solves the plan's request: give the request or model=")
        if isinstance(why_not, str):
            node_id, _, provider = why_not.partition("=")
        else:
            node_id, provider = why_not
        answered = json.loads(call(_native.why_not, text, request_json, source_json, node_id,
                                   provider, options(threads, serving=point)))
        why, shown = answered["answer"], answered["text"]
    return Explanation(plan_id=answer["plan_id"], nodes=answer["nodes"],
                       kv_tradeoff=answer["kv_tradeoff"], why_not=why, _text=shown)


@dataclass(frozen=True)
class PlanDiff:
    """The semantic comparison of two plans of one program (``jointplan diff --json``)."""

    raw: Dict[str, Any] = field(repr=False)
    _text: str = field(default="", repr=False)

    def text(self) -> str:
        """The comparison as ``jointplan diff`` prints it (grouped by id pattern)."""
        return self._text

    @property
    def programs_equal(self) -> bool:
        """Whether the two program fingerprints are equal."""
        return self.raw["programs_equal"]

    @property
    def nodes_changed(self) -> List[Dict[str, str]]:
        """The nodes whose provider differs: ``{node, a, b}``."""
        return self.raw["nodes_changed"]

    def is_empty(self) -> bool:
        """Same providers, profiles and memory figures."""
        return (not self.raw["nodes_changed"] and not self.raw["profiles_changed"]
                and all(m["delta"] == 0 for m in self.raw["memory"].values()))

    def to_dict(self) -> Dict[str, Any]:
        """The comparison as ``jointplan diff --json`` prints it."""
        return self.raw

    def nodes_table(self) -> Table:
        """One row per node whose provider changed: node, provider in A, in B."""
        rows = self.raw["nodes_changed"]
        return Table({"node": [r["node"] for r in rows], "a": [r["a"] for r in rows],
                      "b": [r["b"] for r in rows]})

    def profiles_table(self) -> Table:
        """One row per resource whose storage profile changed (``None``: absent)."""
        rows = self.raw["profiles_changed"]
        return Table({"resource": [r["resource"] for r in rows],
                      "a": [r["a"] for r in rows], "b": [r["b"] for r in rows]})

    def memory_table(self) -> Table:
        """One row per memory figure (bytes): figure, A, B, B - A."""
        memory = self.raw["memory"]
        return Table({"figure": list(memory), "a": [m["a"] for m in memory.values()],
                      "b": [m["b"] for m in memory.values()],
                      "delta": [m["delta"] for m in memory.values()]})

    @property
    def time(self) -> Optional[Dict[str, Any]]:
        """Both plans' time at the serving point (``None`` when not priced):
        ``ttft_seconds``, ``tpot_seconds``, ``output_tokens_per_second``,
        ``prefill_seconds``, ``decode_step_seconds`` (each ``{a, b, delta}``), the sums of the
        provider changes' times and ``not_additive`` (why they need not add up, or ``None``)."""
        return self.raw.get("time")

    def changes_table(self) -> Table:
        """One row per provider change (pattern): A's provider, B's, node count, and when
        priced the prefill and decode-step seconds it adds (B - A; ``None`` otherwise)."""
        rows = self.raw["patterns"]
        time = [r.get("time") or {} for r in rows]
        return Table({"a": [r["a"] for r in rows], "b": [r["b"] for r in rows],
                      "count": [r["count"] for r in rows],
                      "prefill_seconds": [t.get("prefill_seconds") for t in time],
                      "decode_step_seconds": [t.get("decode_step_seconds") for t in time]})


def diff(a: StoredPlan, b: StoredPlan, request: Optional[PathOrDict] = None,
         request_b: Optional[PathOrDict] = None, *, concurrency: Optional[int] = None,
         input_tokens: Optional[int] = None, output_tokens: Optional[int] = None,
         engine: Optional[str] = None, performance_device=None,
         calibration=None) -> PlanDiff:
    """Compares two plans of one program: providers changed (by pattern), storage profiles
    changed, objective keys, memory figures with deltas; with the request (one for both,
    or A's and B's), the memory report's items too, and the plans' time (``time``, and each
    change's in ``changes_table()``) at the serving point given (``concurrency``,
    ``input_tokens``, ``output_tokens``, ``engine``; ``performance_device``, else the device
    figures a plan recorded), else at the one a plan recorded (a time objective records
    one): ``jointplan diff --request ... --concurrency ...``."""
    point = serving(concurrency, input_tokens, output_tokens, engine, performance_device,
                    calibration)
    texts = [None if r is None else json_text(r, "request") for r in (request, request_b)]
    raw = json.loads(call(_native.diff, plan_text(a), plan_text(b), *texts,
                          options(None, serving=point)))
    return PlanDiff(raw["answer"], raw["text"])


@dataclass(frozen=True)
class FitResult:
    """The largest value of a knob that fits (``jointplan fit --maximize KNOB --json``)."""

    knob: str
    largest: Optional[int]
    plan_id: Optional[str]
    raw: Dict[str, Any] = field(repr=False)

    def to_dict(self) -> Dict[str, Any]:
        """The answer as ``jointplan fit --json`` prints it."""
        return self.raw

    @property
    def next(self) -> Optional[Dict[str, Any]]:
        """Why the value after the largest does not fit: ``value``, ``reason``,
        ``bytes_short``, and with a latency target ``binds`` (``memory``, ``latency``,
        ``memory and latency``) and the predicted ``latency`` there."""
        return self.raw.get("next")

    @property
    def latency(self) -> Optional[Dict[str, Any]]:
        """With a latency target: the ``target`` (seconds), the load, the ``rule`` that
        priced it and the predicted figures ``at_largest``; ``None`` otherwise."""
        return self.raw.get("latency")


@dataclass(frozen=True)
class DeviceFits:
    """Which devices of a directory fit (``jointplan fit MODEL --devices DIR --json``):
    fitting first, smallest first."""

    rows: List[Dict[str, Any]]

    def to_dict(self) -> List[Dict[str, Any]]:
        """The rows as ``jointplan fit --devices --json`` prints them."""
        return self.rows

    def table(self) -> Table:
        """One row per device file."""
        names = ("device_file", "device_memory_bytes", "fits", "plan_id", "headroom_bytes",
                 "sequences_that_fit", "reason")
        return Table({name: [r.get(name) for r in self.rows] for name in names})


def fit(request: Optional[PathOrDict] = None, *, model=None, maximize: Optional[str] = None,
        devices: Optional[Union[str, "os.PathLike[str]"]] = None, config=None, device=None,
        policy: Optional[str] = None, layers: Optional[int] = None,
        experts: Optional[int] = None, expert_group_size: Optional[int] = None,
        weight_format: Optional[str] = None,
        threads: Optional[int] = None, max_tpot_ms: Optional[float] = None,
        max_ttft_ms: Optional[float] = None, input_tokens: Optional[int] = None,
        output_tokens: Optional[int] = None, engine: Optional[str] = None,
        performance_device=None, calibration=None,
        context: Optional[int] = None) -> Union[FitResult, DeviceFits]:
    """``maximize="context"|"sequences"|"scheduled-tokens"``: the largest value whose plan
    builds and whose worst case fits, the planner as the oracle (a request or
    ``model=``); ``devices=DIR``: which device files of DIR fit the model (``model=``).

    ``max_tpot_ms`` / ``max_ttft_ms`` (with ``maximize="sequences"``, ``input_tokens`` and
    ``output_tokens``) also hold each value N to the latency target, served at concurrency
    N: ``jointplan fit --max-tpot-ms X --maximize sequences ...``. ``engine`` holds each
    probe to the engine's memory budget and prices with its time profile, as the command
    line's ``--engine``; ``context`` sets the policy's context ceiling while another knob
    is maximized (``--context``)."""
    choices = dict(config=config, device=device, policy=policy, layers=layers,
                   experts=experts, expert_group_size=expert_group_size,
                   weight_format=weight_format)
    if (maximize is None) == (devices is None):
        raise bad_input("give maximize= (a knob) or devices= (a directory), one of them")
    if devices is not None:
        if model is None:
            raise bad_input("devices= needs model= (a model folder)")
        rows = json.loads(call(_native.fit_devices, source(model, **choices),
                               os.fspath(devices), options(threads)))
        return DeviceFits(rows)
    request_json, source_json = request_or_source(request, model, **choices)
    point = serving(None, input_tokens, output_tokens, None, performance_device, calibration,
                    fit=True)
    for name, value in (("max_tpot_ms", max_tpot_ms), ("max_ttft_ms", max_ttft_ms)):
        # NaN and infinities have no JSON spelling: refused here, the rest by the library.
        if value is not None and (isinstance(value, bool)
                                  or not isinstance(value, (int, float))
                                  or not math.isfinite(value)):
            raise bad_input(f"{name}: {value} is not a positive number of milliseconds")
    if point is not None:
        point["engine"] = engine
    if point is not None and max_tpot_ms is None and max_ttft_ms is None:
        raise bad_input("input_tokens= and output_tokens= apply to a latency target: give "
                        "max_tpot_ms= or max_ttft_ms=")
    extra = {"engine": engine, "max_tpot_ms": max_tpot_ms, "max_ttft_ms": max_ttft_ms,
             "context": context}
    raw = json.loads(call(_native.fit, request_json, source_json, maximize,
                          options(threads, serving=point, extra=extra)))
    return FitResult(knob=raw["knob"], largest=raw["largest"], plan_id=raw["plan_id"], raw=raw)
