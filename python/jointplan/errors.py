"""The exceptions of jointplan, and the translation of the extension's errors into them."""

from __future__ import annotations

from typing import Optional, Sequence

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
    """The input is well formed but no plan satisfies it (exit status 1)."""


class Rejected(JointplanError):
    """A stored plan was rejected by verification (exit status 1)."""


_KINDS = {"bad_input": BadInput, "infeasible": Infeasible, "rejected": Rejected}


def error_of(fields: Sequence[Optional[str]]) -> JointplanError:
    """The typed exception of an error's ``(kind, message, path, file)``."""
    kind, message, path, file = fields
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
