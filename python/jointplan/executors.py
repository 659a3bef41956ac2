"""Where the tasks of a sweep run: local threads, a Dask cluster or Ray.

A task is a batch of grid points as JSON text and comes back as JSON text (the rows, or
the error's fields): no pyo3 object is pickled, and the function a worker runs,
:func:`run_task`, is importable from any process that has jointplan installed. Each task
plans its points one after the other with the thread count it carries, so a worker never
starts more planning threads than it was given (a rayon pool per plan, not one per core).
"""

from __future__ import annotations

import json
import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any, List, Optional

from . import _native
from .errors import bad_input, error_of


def run_task(task_json: str) -> str:
    """Plans one task on the worker that runs it: the rows as a JSON list, or
    ``{"error": [kind, message, path, file]}``."""
    try:
        return _native.plan_batch(task_json)
    except _native.NativeError as error:
        fields = error.args[0] if len(error.args) == 1 else error.args
        return json.dumps({"error": list(fields)})


def task_rows(result_json: str) -> List[dict]:
    """The rows of a finished task, or its error raised as a typed exception."""
    result = json.loads(result_json)
    if isinstance(result, dict):
        raise error_of(result["error"])
    return result


class LocalExecutor:
    """Tasks on threads of this process (the extension releases the GIL while it plans)."""

    name = "local"

    def __init__(self, workers: int):
        self.pool = ThreadPoolExecutor(max_workers=workers)

    def submit(self, task_json: str) -> Any:
        return self.pool.submit(run_task, task_json)

    def result(self, handle: Any) -> str:
        return handle.result()

    def cancel(self, handles: List[Any]) -> None:
        for handle in handles:
            handle.cancel()

    def close(self) -> None:
        self.pool.shutdown(wait=True, cancel_futures=True)


class DaskExecutor:
    """Tasks as Dask futures on a ``distributed.Client``; when none is given, a new local
    cluster of one worker with ``workers`` threads in this process.

    Threads, not processes: the extension releases the GIL while it plans, so threads plan in
    parallel, and nothing is spawned. A spawned worker process re-imports the driver's
    ``__main__``: a plain script without an ``if __name__ == "__main__"`` guard would start
    its sweep again in every worker, and a script read from standard input cannot be
    re-imported at all. Pass a ``Client`` of your own for worker processes or a real cluster."""

    name = "dask"

    def __init__(self, client: Any = None, workers: int = 1):
        self.owned = None
        if client is None:
            try:
                from distributed import Client, LocalCluster
            except ImportError as error:
                raise ImportError('executor="dask" needs dask.distributed: '
                                  'pip install "dask[distributed]"') from error
            cluster = LocalCluster(n_workers=1, threads_per_worker=workers, processes=False,
                                   dashboard_address=None)
            client = Client(cluster)
            self.owned = (client, cluster)
        self.client = client

    def submit(self, task_json: str) -> Any:
        return self.client.submit(run_task, task_json, pure=False)

    def result(self, handle: Any) -> str:
        return handle.result()

    def cancel(self, handles: List[Any]) -> None:
        self.client.cancel(handles)

    def close(self) -> None:
        if self.owned is not None:
            client, cluster = self.owned
            client.close()
            cluster.close()


class RayExecutor:
    """Tasks as Ray remote functions, each reserving the CPUs its plans use (Ray is
    initialised with ``num_cpus=workers`` when it is not already)."""

    name = "ray"

    def __init__(self, ray: Any, workers: int, threads: int):
        self.ray = ray
        self.owned = False
        if not ray.is_initialized():
            ray.init(num_cpus=workers, include_dashboard=False, log_to_driver=False)
            self.owned = True
        self.remote = ray.remote(num_cpus=threads)(run_task)

    def submit(self, task_json: str) -> Any:
        return self.remote.remote(task_json)

    def result(self, handle: Any) -> str:
        return self.ray.get(handle)

    def cancel(self, handles: List[Any]) -> None:
        for handle in handles:
            self.ray.cancel(handle)

    def close(self) -> None:
        if self.owned:
            self.ray.shutdown()


def _is_dask_client(value: Any) -> bool:
    kind = type(value)
    return kind.__name__ == "Client" and kind.__module__.startswith("distributed")


def executor_for(spec: Any, workers: Optional[int], threads: int):
    """The executor ``spec`` names: ``"local"``, ``"dask"``, ``"ray"``, a
    ``dask.distributed.Client``, or the ``ray`` module once initialised."""
    count = workers if workers is not None else (os.cpu_count() or 1)
    if not isinstance(count, int) or isinstance(count, bool) or count < 1:
        raise bad_input("workers must be a positive integer")
    if spec == "local":
        return LocalExecutor(count)
    if spec == "dask":
        return DaskExecutor(None, count)
    if spec == "ray":
        try:
            import ray
        except ImportError as error:
            raise ImportError('executor="ray" needs ray: pip install ray') from error
        return RayExecutor(ray, count, threads)
    if _is_dask_client(spec):
        return DaskExecutor(spec)
    if getattr(spec, "__name__", None) == "ray" and hasattr(spec, "remote"):
        if not spec.is_initialized():
            raise bad_input("executor=ray: call ray.init() first, or pass executor=\"ray\"")
        return RayExecutor(spec, count, threads)
    raise bad_input(f"executor {spec!r}: expected \"local\", \"dask\", \"ray\", a "
                    "dask.distributed.Client or the initialised ray module")
