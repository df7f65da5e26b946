"""The dynamic batcher: jobs that arrive within the wait window with equal settings decode in
one call, up to ``max_batch`` rows, on one decode thread, while the event loop keeps taking
requests.

The oldest waiting job opens a window: jobs with its settings join until its batch is full or
the window since that job's arrival is over (a job that waited through another batch's decode
goes at once). Then the settings with the most rows waiting decode (up to ``max_batch``
rows), unless the oldest job has already been passed over :data:`MAX_PASSED_OVER` times: its
settings go then. Rows waiting or decoding are bounded (:class:`Busy` past ``max_rows``).
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from unmask.serve.jobs import Job

#: a group's decoder: (jobs, report) -> one result list per job; ``report(job, row, ids)``
#: gives a streaming job's committed ids of one row
DecodeFn = Callable[[list[Job], Callable[[Job, int, list[int]], None]], list[list]]


#: calls a waiting job may see go to other settings before its own go next
MAX_PASSED_OVER = 3


class Busy(Exception):
    """The server holds as many rows as it may (``max_rows``)."""


@dataclass(eq=False)
class Ticket:
    """A queued job's handle: ``result`` (its rows' results, or the decode's error) and, for
    a streaming job, ``blocks``: a queue that receives ``("blocks", ticket, row, ids)`` (the
    committed generated ids of a row) as blocks are committed."""

    job: Job
    arrived: float
    result: asyncio.Future
    blocks: asyncio.Queue | None = None
    passed_over: int = 0


class Batcher:
    """Queues jobs and decodes compatible ones together (module docstring).

    decode: the group decoder (:func:`unmask.serve.decoding.decode_jobs` bound to a model);
    max_batch: rows per call; wait_s: the batch window; max_rows: rows waiting or decoding.
    """

    def __init__(self, decode: DecodeFn, *, max_batch: int, wait_s: float, max_rows: int):
        self.decode, self.max_batch, self.wait_s, self.max_rows = (decode, max_batch, wait_s,
                                                                   max_rows)
        self.pending: list[Ticket] = []
        self.rows_held = 0
        #: the last decode calls: {"jobs", "rows", "passes" (the most any row took), "wall_s"}
        self.calls: deque[dict] = deque(maxlen=256)
        self.totals = {"decode_calls": 0, "rows_decoded": 0}
        self._wake: asyncio.Event | None = None
        self._task: asyncio.Task | None = None
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="unmask-decode")

    def submit(self, jobs: list[Job], blocks: asyncio.Queue | None = None) -> list[Ticket]:
        """Queue ``jobs`` (all or none: :class:`Busy` when their rows do not fit); call from
        the event loop. ``blocks``: the queue of the streaming jobs' committed blocks."""
        loop = asyncio.get_running_loop()
        rows = sum(len(j.rows) for j in jobs)
        if self.rows_held + rows > self.max_rows:
            raise Busy(f"the server holds {self.rows_held} rows (limit {self.max_rows}); "
                       "retry later")
        if self._task is None or self._task.done():
            self._wake = asyncio.Event()
            self._task = loop.create_task(self._run())
        now = loop.time()
        tickets = [Ticket(j, now, loop.create_future(), blocks if j.stream else None)
                   for j in jobs]
        self.pending += tickets
        self.rows_held += rows
        self._wake.set()
        return tickets

    def cancel(self, tickets: list[Ticket]) -> None:
        """The client has gone: drop waiting tickets, let decoding rows leave their call."""
        for t in tickets:
            t.job.cancelled = True
            if t in self.pending:
                self.pending.remove(t)
                self.rows_held -= len(t.job.rows)
            if not t.result.done():
                t.result.cancel()

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
        self._pool.shutdown(wait=False, cancel_futures=True)

    async def _run(self) -> None:
        while True:
            if not self.pending:
                self._wake.clear()
                await self._wake.wait()
                continue
            group = []
            try:
                group = await self._gather()
                if group:
                    await self._decode(group)
            except Exception as e:  # noqa: BLE001 - the batcher outlives any one call
                for t in group:
                    if not t.result.done():
                        t.result.set_exception(e)
                        t.result.exception()

    async def _gather(self) -> list[Ticket]:
        """Wait out the oldest job's window (or until its batch is full), then take its
        batch from the queue."""
        loop = asyncio.get_running_loop()
        key = self.pending[0].job.settings
        deadline = self.pending[0].arrived + self.wait_s
        while self._rows(key) < self.max_batch and (left := deadline - loop.time()) > 0:
            self._wake.clear()
            try:
                await asyncio.wait_for(self._wake.wait(), left)
            except asyncio.TimeoutError:
                break
            if not self.pending or self.pending[0].job.settings != key:
                return []  # the opener was cancelled: start again from the new oldest
        key = self._next_key()
        group, rows = [], 0
        for t in list(self.pending):
            if t.job.settings == key and rows + len(t.job.rows) <= self.max_batch:
                group.append(t)
                rows += len(t.job.rows)
                self.pending.remove(t)
        for t in self.pending:
            t.passed_over += 1
        return group

    def _next_key(self):
        """The settings of the next call: the oldest job's once it has been passed over
        :data:`MAX_PASSED_OVER` times, else those with the most rows waiting (the oldest
        first among equals): larger calls, and no job waits more than a few calls."""
        oldest = self.pending[0]
        if oldest.passed_over >= MAX_PASSED_OVER:
            return oldest.job.settings
        rows: dict = {}
        for t in self.pending:
            rows[t.job.settings] = rows.get(t.job.settings, 0) + len(t.job.rows)
        return max(rows, key=lambda k: min(rows[k], self.max_batch))  # first max: oldest

    def _rows(self, key) -> int:
        return sum(len(t.job.rows) for t in self.pending if t.job.settings == key)

    async def _decode(self, group: list[Ticket]) -> None:
        loop = asyncio.get_running_loop()
        owner = {id(t.job): t for t in group}

        def report(job: Job, row: int, ids: list[int]) -> None:
            ticket = owner[id(job)]
            if ticket.blocks is not None:
                loop.call_soon_threadsafe(ticket.blocks.put_nowait,
                                          ("blocks", ticket, row, ids))

        started = time.perf_counter()
        call = {"jobs": len(group), "rows": sum(len(t.job.rows) for t in group), "passes": 0}
        try:
            results = await loop.run_in_executor(self._pool, self.decode,
                                                 [t.job for t in group], report)
        except Exception as e:  # noqa: BLE001 - every waiting request gets the error
            for t in group:
                if not t.result.done():
                    t.result.set_exception(e)
                    t.result.exception()  # retrieved here: a gone client never reads it
        else:
            call["passes"] = max((getattr(g, "nfe", 0) for rows in results for g in rows),
                                 default=0)
            for t, rows in zip(group, results, strict=True):
                if not t.result.done():
                    t.result.set_result(rows)
        finally:
            self.rows_held -= call["rows"]
            self.totals["decode_calls"] += 1
            self.totals["rows_decoded"] += call["rows"]
            self.calls.append({**call, "wall_s": round(time.perf_counter() - started, 4)})
