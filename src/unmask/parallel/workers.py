"""Engines: run independent jobs on workers that each hold one loaded model.

An engine is opened with a ``setup`` callable (for example one that loads a model); every worker
calls it once and keeps the result as its state. ``map_unordered(fn, jobs)`` then runs
``fn(state, job)`` for every job and yields ``(index, result)`` as jobs finish, in any order;
the caller (the driver) writes results. ``call(fn, arg)`` runs one ``fn(state, arg)`` on one
worker (e.g. to read the model's fingerprint where the model lives).

- :class:`LocalEngine`: one worker, this process, jobs in order (no extra dependency).
- :class:`RayEngine`: ``workers`` Ray actors, each reserving ``cpus_per_worker`` CPUs and
  ``gpus_per_worker`` GPUs (``pip install 'unmask[ray]'``). It connects to the cluster named by
  ``address`` or ``RAY_ADDRESS``, else starts a local one sized for the workers, and shuts down
  what it started on :meth:`Engine.close`. A worker that dies is restarted (it calls ``setup``
  again) and its job retried, up to ``max_restarts`` times per worker.

``setup``, ``fn``, jobs and results cross process boundaries under Ray: they must be picklable
(module-level functions, dataclasses, tensors, bytes).
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from unmask.errors import UnmaskError, require
from unmask.validation import is_int

ENGINES = ("local", "ray")


class Engine:
    """A pool of workers holding state; see the module docstring."""

    name = "engine"
    workers = 1

    def open(self, setup: Callable[[], Any]) -> None:
        raise NotImplementedError

    def call(self, fn: Callable[[Any, Any], Any], arg: Any = None) -> Any:
        raise NotImplementedError

    def map_unordered(self, fn: Callable[[Any, Any], Any],
                      jobs: Sequence[Any]) -> Iterator[tuple[int, Any]]:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class LocalEngine(Engine):
    """One worker in this process; jobs run in order."""

    name = "local"

    def __init__(self) -> None:
        self.workers = 1
        self._state: Any = None
        self._opened = False

    def open(self, setup: Callable[[], Any]) -> None:
        self._state = setup()
        self._opened = True

    def call(self, fn, arg=None):
        require(self._opened, "engine: call open() first")
        return fn(self._state, arg)

    def map_unordered(self, fn, jobs):
        require(self._opened, "engine: call open() first")
        for index, job in enumerate(jobs):
            yield index, fn(self._state, job)

    def close(self) -> None:
        self._state = None
        self._opened = False


class _Worker:
    """Body of one Ray actor: the state ``setup`` built, and calls on it."""

    def __init__(self, setup: Callable[[], Any], threads: int) -> None:
        import torch

        torch.set_num_threads(threads)
        self.state = setup()

    def run(self, fn, job):
        return fn(self.state, job)

    def pid(self) -> int:
        return os.getpid()


def import_ray():
    """The ``ray`` module, or :class:`UnmaskError` saying how to install it."""
    try:
        import ray
    except ImportError:
        raise UnmaskError("engine: ray is not installed (pip install 'unmask[ray]')") from None
    return ray


def _host_port(address: str) -> tuple[str, int] | None:
    """(host, port) of a Ray address, None for 'auto'/'local' (nothing to probe)."""
    if address in ("auto", "local"):
        return None
    default_port = 6379
    if address.startswith("ray://"):
        address, default_port = address[len("ray://"):], 10001
    host, sep, port = address.rpartition(":")
    if not sep:
        return address, default_port
    try:
        return host.strip("[]"), int(port)
    except ValueError:
        raise UnmaskError(f"RAY_ADDRESS: expected HOST:PORT, got {address!r}") from None


def _cause(error: BaseException) -> BaseException:
    return getattr(error, "cause", None) or error


def _one_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0] if text else ''}"


class RayEngine(Engine):
    """``workers`` Ray actors, one state (model) each.

    Args:
        workers: number of actors (>= 1).
        cpus_per_worker: CPUs each actor reserves; also its torch thread count.
        gpus_per_worker: GPUs each actor reserves (Ray sets CUDA_VISIBLE_DEVICES per actor).
        address: cluster address; None reads RAY_ADDRESS, and without it a local cluster of
            ``workers * cpus_per_worker`` CPUs is started.
        max_restarts: restarts (and job retries) allowed per actor after it dies.
        connect_timeout: seconds to wait for the cluster's port before refusing.
    """

    name = "ray"

    def __init__(self, workers: int = 2, *, cpus_per_worker: int = 1,
                 gpus_per_worker: float = 0, address: str | None = None,
                 max_restarts: int = 1, connect_timeout: float = 5.0) -> None:
        require(is_int(workers) and workers >= 1,
                f"workers: must be an integer >= 1, got {workers!r}")
        require(is_int(cpus_per_worker) and cpus_per_worker >= 1,
                f"cpus_per_worker: must be an integer >= 1, got {cpus_per_worker!r}")
        require(gpus_per_worker >= 0, f"gpus_per_worker: must be >= 0, got {gpus_per_worker}")
        require(max_restarts >= 0, f"max_restarts: must be >= 0, got {max_restarts}")
        self.workers = workers
        self.cpus_per_worker = cpus_per_worker
        self.gpus_per_worker = gpus_per_worker
        self.address = address if address is not None else os.environ.get("RAY_ADDRESS") or None
        self.max_restarts = max_restarts
        self.connect_timeout = connect_timeout
        self._ray = None
        self._started = False
        self._actors: list = []
        self.pids: list[int] = []  # the actors' process ids once open (not updated on restart)

    def _connect(self, ray) -> None:
        if ray.is_initialized():  # a caller's Ray session: use it, leave it running
            return
        if self.address:
            target = _host_port(self.address)
            if target is not None:
                try:
                    socket.create_connection(target, timeout=self.connect_timeout).close()
                except OSError as e:
                    raise UnmaskError(f"RAY_ADDRESS: cannot reach {self.address} "
                                      f"({e.strerror or e})") from None
            kwargs = {"address": self.address}
        else:
            kwargs = {"num_cpus": self.workers * self.cpus_per_worker,
                      "include_dashboard": False, "object_store_memory": 1 << 30}
        try:
            ray.init(logging_level="ERROR", log_to_driver=False, **kwargs)
        except Exception as e:  # noqa: BLE001 - Ray raises many types; all mean "no cluster"
            where = self.address or "a local cluster"
            raise UnmaskError(f"engine: cannot start Ray on {where} ({_one_line(e)})") from None
        self._started = True

    def open(self, setup: Callable[[], Any]) -> None:
        ray = self._ray = import_ray()
        self._connect(ray)
        actor = ray.remote(_Worker).options(
            num_cpus=self.cpus_per_worker, num_gpus=self.gpus_per_worker,
            max_restarts=self.max_restarts, max_task_retries=self.max_restarts)
        self._actors = [actor.remote(setup, self.cpus_per_worker) for _ in range(self.workers)]
        self.pids = self._get([a.pid.remote() for a in self._actors], "starting a worker")

    def _get(self, refs, what: str):
        ray = self._ray
        try:
            return ray.get(refs)
        except ray.exceptions.RayTaskError as e:
            cause = _cause(e)
            if isinstance(cause, UnmaskError):
                raise UnmaskError(str(cause)) from None
            raise UnmaskError(f"engine: {what} failed on a Ray worker ({_one_line(cause)})"
                              ) from None
        except ray.exceptions.RayActorError as e:
            cause = _cause(e)
            if isinstance(cause, UnmaskError):  # raised by setup()
                raise UnmaskError(str(cause)) from None
            raise UnmaskError(f"engine: a Ray worker died {what} and its restarts are spent; "
                              f"run again to resume") from None

    def call(self, fn, arg=None):
        require(bool(self._actors), "engine: call open() first")
        return self._get(self._actors[0].run.remote(fn, arg), "running a call")

    def map_unordered(self, fn, jobs):
        require(bool(self._actors), "engine: call open() first")
        ray = self._ray
        queue = list(enumerate(jobs))[::-1]
        idle = list(self._actors)
        pending: dict = {}
        # one job in flight per actor: a restarted actor retries at most one job, and the
        # driver writes each result before the next one arrives
        while queue or pending:
            while idle and queue:
                index, job = queue.pop()
                actor = idle.pop()
                pending[actor.run.remote(fn, job)] = (index, actor)
            (ref,), _ = ray.wait(list(pending), num_returns=1)
            index, actor = pending.pop(ref)
            result = self._get(ref, f"running job {index}")
            idle.append(actor)
            yield index, result

    def close(self) -> None:
        ray = self._ray
        if ray is None:
            return
        for actor in self._actors:
            try:
                ray.kill(actor)
            except Exception:  # noqa: BLE001, S110 - an actor already gone needs no kill
                pass
        self._actors = []
        if self._started:
            ray.shutdown()
            self._started = False


def worker_path(value: str | None) -> str | None:
    """``value`` made absolute if it names an existing path here (workers may run in another
    folder); anything else (a shipped name, None) unchanged."""
    if isinstance(value, str) and value and Path(value).exists():
        return str(Path(value).resolve())
    return value


def make_engine(name: str, workers: int | None = None, *, cpus_per_worker: int = 1,
                gpus_per_worker: float = 0) -> Engine:
    """The engine ``name`` (local or ray) with ``workers`` workers (None: 1)."""
    require(name in ENGINES, f"engine: expected one of {', '.join(ENGINES)}, got {name!r}")
    if workers is not None:
        require(is_int(workers) and workers >= 1,
                f"workers: must be an integer >= 1, got {workers!r}")
    if name == "local":
        require(workers in (None, 1),
                f"workers: the local engine runs 1 worker, got {workers}; use --engine ray")
        return LocalEngine()
    import_ray()
    return RayEngine(workers or 1, cpus_per_worker=cpus_per_worker,
                     gpus_per_worker=gpus_per_worker)
