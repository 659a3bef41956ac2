"""The same 200-point sweep on the local executor and on a local Dask cluster of two
single-threaded worker processes: wall time of each, their ratio, and a check that both
wrote the same rows (every field but each point's wall time, ``plan_seconds``).

Run from the repository's root, after installing the package (a release build:
``pip install ./python`` builds one):

    python python/examples/sweep_executors.py [OUT_DIR]
"""

import shutil
import sys
import tempfile
import time
from pathlib import Path

import jointplan

# 2 devices x 10 contexts x 5 sequence counts x 2 view orders = 200 points of the full
# llama-3.2-1b (16 layers).
GRID = {
    "model": ["models/llama-3.2-1b"],
    "device": ["models/devices/rtx-4090-24gb.json", "models/devices/a100-40gb.json"],
    "context": [1024, 2048, 3072, 4096, 6144, 8192, 16384, 32768, 65536, 131072],
    "sequences": [4, 8, 16, 32, 64],
    "storage_views": [["contiguous", "paged"], ["paged", "contiguous"]],
    "region_axes": ["context", "sequences"],
}


def timed(label, out, **settings):
    shutil.rmtree(out, ignore_errors=True)
    started = time.perf_counter()
    result = jointplan.sweep(GRID, out, **settings)
    seconds = time.perf_counter() - started
    assert result.planned == result.points == 200, (result.planned, result.points)
    print(f"{label}: {result.points} points in {seconds:.1f} s wall")
    return result, seconds


def without_timing(rows):
    return [{k: v for k, v in row.items() if k != "plan_seconds"} for row in rows]


def main():
    base = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp())
    local, local_s = timed("local executor, 2 threads, 1 planning thread each",
                           base / "local", executor="local", workers=2, threads=1, batch=4)
    from distributed import Client, LocalCluster
    started = time.perf_counter()
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                      dashboard_address=None) as cluster, Client(cluster) as client:
        print(f"  (Dask cluster start: {time.perf_counter() - started:.1f} s, not counted)")
        dask, dask_s = timed("Dask, 2 worker processes x 1 thread", base / "dask",
                             executor=client, threads=1, batch=4)
    assert without_timing(local.rows) == without_timing(dask.rows), "rows differ"
    print(f"rows identical; Dask / local wall time: {dask_s / local_s:.2f}")
    statuses = {}
    for row in local.rows:
        statuses[row["status"]] = statuses.get(row["status"], 0) + 1
    print(f"statuses: {statuses}")


if __name__ == "__main__":
    main()
