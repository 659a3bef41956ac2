"""docs/python.md cannot go stale: its Python blocks run in order, in one namespace, and
each block's output must equal the ``text`` block that follows it (a line ``...`` matches
any lines). ``JOINTPLAN_BLESS=1`` rewrites the ``text`` blocks with what the code prints."""

import contextlib
import io
import os
import re

from conftest import ROOT

DOC = ROOT / "docs" / "python.md"
FENCE = re.compile(r"^```([a-z]*)\n(.*?)^```\n", re.S | re.M)


def blocks(text):
    """(language, body, start, end) of every fenced block."""
    return [(m.group(1), m.group(2), m.start(2), m.end(2)) for m in FENCE.finditer(text)]


def matches(expected, actual):
    """Whether ``actual`` lines equal ``expected`` lines, ``...`` matching any lines."""
    if not expected:
        return not actual
    if expected[0] == "...":
        return any(matches(expected[1:], actual[i:]) for i in range(len(actual) + 1))
    return bool(actual) and expected[0] == actual[0] and matches(expected[1:], actual[1:])


def test_every_python_block_prints_the_text_block_after_it(tmp_path, monkeypatch):
    # The blocks read `models/...` and write `study-out`: run them in a scratch directory
    # that sees the repository's models.
    (tmp_path / "models").symlink_to(ROOT / "models")
    monkeypatch.chdir(tmp_path)
    text = DOC.read_text()
    found = blocks(text)
    namespace = {}
    failures, edits, ran = [], [], 0
    for i, (language, body, _, _) in enumerate(found):
        if language != "python":
            continue
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile(body, f"{DOC}:python block {ran + 1}", "exec"), namespace)
        ran += 1
        if i + 1 < len(found) and found[i + 1][0] == "text":
            _, expected, start, end = found[i + 1]
            actual = [line.rstrip() for line in out.getvalue().splitlines()]
            wanted = [line.rstrip() for line in expected.splitlines()]
            if not matches(wanted, actual):
                failures.append(f"python block {ran}:\n--- docs\n{expected}--- printed\n"
                                + "\n".join(actual))
                edits.append((start, end, "\n".join(actual) + "\n"))
    assert ran >= 5, "docs/python.md lost its examples"
    if failures and os.environ.get("JOINTPLAN_BLESS") == "1":
        for start, end, new in sorted(edits, reverse=True):
            text = text[:start] + new + text[end:]
        DOC.write_text(text)
        return
    assert not failures, "\n\n".join(failures) + "\n(JOINTPLAN_BLESS=1 rewrites them)"
