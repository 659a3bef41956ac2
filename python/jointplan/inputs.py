"""What the Python layer sends to the extension: JSON text of documents, options and
model sources (the extension takes and returns JSON only, so that nothing Rust-owned
crosses a process boundary)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Iterable, Mapping, Optional, Tuple, Union

from .errors import bad_input

PathLike = Union[str, "os.PathLike[str]"]
PathOrDict = Union[PathLike, Mapping[str, Any]]


def json_text(value: PathOrDict, what: str) -> str:
    """JSON text of a path (read as is: the Rust reader checks it) or of a dict."""
    if isinstance(value, Mapping):
        return json.dumps(value)
    if isinstance(value, (str, os.PathLike)):
        try:
            return Path(value).read_text(encoding="utf-8")
        except OSError as error:
            raise bad_input(f"{value}: cannot read the {what}: {error}", None,
                            str(value)) from None
    raise TypeError(f"{what}: expected a path or a dict, not {type(value).__name__}")


def check_threads(threads: Optional[int]) -> None:
    """Refuses a thread count that is not a positive integer."""
    if threads is not None and (not isinstance(threads, int) or isinstance(threads, bool)
                                or threads < 1):
        raise bad_input("threads must be a positive integer")


def _pins(pins: Optional[Mapping[str, str]]) -> Optional[dict]:
    return None if pins is None else {str(node): str(p) for node, p in pins.items()}


def _forbids(forbids: Optional[Mapping[str, Union[str, Iterable[str]]]]) -> Optional[dict]:
    if forbids is None:
        return None
    return {str(node): [providers] if isinstance(providers, str) else [str(p) for p in providers]
            for node, providers in forbids.items()}


def serving(concurrency: Optional[int] = None, input_tokens: Optional[int] = None,
            output_tokens: Optional[int] = None, engine: Optional[str] = None,
            performance_device: Optional[PathLike] = None,
            calibration: Optional[PathLike] = None, fit: bool = False,
            lengths: Optional[str] = None) -> Optional[dict]:
    """A serving point (the command line's ``--concurrency --input-tokens --output-tokens
    --engine --performance-device --calibration``), or ``None`` when none is given. A
    partial one names the missing keyword; a fit's has no concurrency (each value probed
    is one)."""
    counts = {"concurrency": concurrency, "input_tokens": input_tokens,
              "output_tokens": output_tokens}
    if fit:
        counts.pop("concurrency")
        if concurrency is not None:
            raise bad_input("concurrency= does not apply to fit: each value of the knob is "
                            "the concurrency")
    extras = {"engine": engine, "performance_device": performance_device,
              "calibration": calibration, "lengths": lengths}
    if all(v is None for v in counts.values()):
        given = [name for name, v in extras.items() if v is not None]
        if given and not fit:
            raise bad_input(f"{given[0]}= applies to a serving point: give "
                            "concurrency=, input_tokens= and output_tokens=")
        if given and fit:
            raise bad_input(f"{given[0]}= applies to a latency target: give "
                            "input_tokens= and output_tokens=")
        return None
    for name, value in counts.items():
        if value is None:
            raise bad_input(f"{name}= is missing: a serving point needs "
                            + ", ".join(f"{n}=" for n in counts))
        if not isinstance(value, int) or isinstance(value, bool):
            raise bad_input(f"{name} must be a non-negative integer")
    out = dict(counts)
    out["engine"] = engine
    out["performance_device"] = None if performance_device is None else os.fspath(
        performance_device)
    out["calibration"] = None if calibration is None else os.fspath(calibration)
    out["fit"] = fit
    if lengths is not None:
        if not isinstance(lengths, str):
            raise bad_input("lengths must be a string: fixed, sglang[:R[:SEED]] or vllm[:R]")
        out["lengths"] = lengths
    return out


def options(threads: Optional[int], objective: Optional[str] = None,
            weights: Optional[Mapping[str, Any]] = None, node_limit: Optional[int] = None,
            time_limit: Optional[float] = None, allow_uncertified: bool = False,
            timings: bool = True, pins: Optional[Mapping[str, str]] = None,
            forbids=None, serving: Optional[dict] = None,
            extra: Optional[Mapping[str, Any]] = None) -> str:
    """The options of a call: thread count, objective, limits, pins and forbids (the
    command line's ``--pin NODE=PROVIDER`` and ``--forbid NODE=PROVIDER``), the serving
    point that prices plans, and a call's own keywords (``extra``)."""
    check_threads(threads)
    return json.dumps({
        **dict(extra or {}),
        "serving": serving,
        "threads": threads,
        "objective": objective,
        "weights": dict(weights) if weights is not None else None,
        "node_limit": node_limit,
        "time_limit": time_limit,
        "allow_uncertified": allow_uncertified,
        "timings": timings,
        "pins": _pins(pins),
        "forbids": _forbids(forbids),
    })


def source(model=None, config=None, device=None, policy=None, layers=None, experts=None,
           expert_group_size=None, weight_format=None) -> str:
    """A model source: a folder (or ``config.json``) and the synthesis choices."""
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


def request_or_source(request: Optional[PathOrDict], model, **choices
                      ) -> Tuple[Optional[str], Optional[str]]:
    """The request's JSON text, or else the model source's (exactly one is given). A
    directory given as the request is a model folder, as on the command line
    (``jointplan plan models/llama-3.2-1b``)."""
    if (model is None and isinstance(request, (str, os.PathLike))
            and Path(request).is_dir()):
        request, model = None, request
    if request is not None:
        if model is not None:
            raise bad_input("give a request or model=, not both")
        given = sorted(name for name, value in choices.items() if value is not None)
        if given:
            raise bad_input(f"{', '.join(given)} apply to a model folder (model=); a request "
                            "is planned as it is")
        return json_text(request, "request"), None
    if model is None:
        raise bad_input("give a request (path or dict) or model= (a model folder)")
    return None, source(model, **choices)
