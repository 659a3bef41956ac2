"""The exceptions of jointplan, and the translation of the extension's errors into them."""

from __future__ import annotations

import json
from typing import Any, Dict, List, Optional, Sequence

from . import _native


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
    """The input is well formed but no plan satisfies it (exit status 1). ``reason`` is
    why, where it was found (what ``jointplan plan --json`` prints for an infeasible
    request): ``kind`` (``selection``, ``capacity`` or ``limit``), ``core`` (the minimal
    set of conflicting facts) and ``relaxations`` (each change that alone makes it build),
    also given as :attr:`core` and :attr:`relaxations`; the message ends with the command
    line's explanation."""

    def __init__(self, kind: str, message: str, path: Optional[str] = None,
                 file: Optional[str] = None, reason: Optional[Dict[str, Any]] = None):
        super().__init__(kind, message, path, file)
        self.reason = reason

    @property
    def core(self) -> List[Dict[str, Any]]:
        """The minimal set of conflicting facts (empty when none was found)."""
        return [] if self.reason is None else self.reason.get("core", [])

    @property
    def relaxations(self) -> List[Dict[str, Any]]:
        """The changes that each alone make the request build (empty when none was found)."""
        return [] if self.reason is None else self.reason.get("relaxations", [])


class Rejected(JointplanError):
    """A stored plan was rejected by verification (exit status 1)."""


_KINDS = {"bad_input": BadInput, "infeasible": Infeasible, "rejected": Rejected}


def error_of(fields: Sequence[Optional[str]]) -> JointplanError:
    """The typed exception of an error's ``(kind, message, path, file[, reason])``
    (``reason``: the JSON of why a request is infeasible)."""
    kind, message, path, file = fields[:4]
    reason = fields[4] if len(fields) > 4 else None
    if kind == "infeasible":
        return Infeasible(kind, message, path, file,
                          None if reason is None else json.loads(reason))
    return _KINDS.get(kind, JointplanError)(kind, message, path, file)


def call(function, *args):
    """Calls an extension function, raising its error as a typed exception."""
    try:
        return function(*args)
    except _native.NativeError as error:
        fields = error.args[0] if len(error.args) == 1 else error.args
        raise error_of(fields) from None


def bad_input(message: str, path: Optional[str] = None,
              file: Optional[str] = None) -> BadInput:
    """A :class:`BadInput` raised by the Python layer itself."""
    return BadInput("bad_input", message, path, file)
