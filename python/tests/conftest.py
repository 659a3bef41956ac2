"""Shared helpers of the Python tests: the repository's root and the command line."""

import json
import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def cli(*args):
    """Runs the `jointplan` binary (JOINTPLAN_BIN, else the release build, else cargo)
    in the repository's root."""
    binary = os.environ.get("JOINTPLAN_BIN") or str(ROOT / "target" / "release" / "jointplan")
    command = [binary, *args] if Path(binary).exists() else [
        "cargo", "run", "--release", "--quiet", "--", *args]
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False)


def cli_json(*args):
    """The JSON the command line prints (it must succeed)."""
    result = cli(*args)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def without_timing(rows):
    """Sweep rows without `plan_seconds` (a wall time: the one field that differs
    between two runs of the same point)."""
    return [{k: v for k, v in row.items() if k != "plan_seconds"} for row in rows]
