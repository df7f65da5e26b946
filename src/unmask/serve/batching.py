"""The dynamic batcher: jobs that arrive within the wait window with equal settings decode in
one call, up to ``max_batch`` rows, on decode threads, while the event loop keeps taking
requests.

The oldest waiting job opens a window: jobs with its settings join until its batch is full or
the window is over, ``wait_s`` after that job's arrival or after the last call ended,
whichever is later (so that clients answered by that call can join the next). Then the
settings with the most rows waiting decode (up to ``max_batch`` rows), unless the oldest job
has already been passed over :data:`MAX_PASSED_OVER` times: its settings go then. Rows
waiting or decoding are bounded (:class:`Busy` past ``max_rows``).

A long call does not hold the others up. One call computes at a time (a lock the computing
call holds: a model's forward pass need not be thread-safe); the others wait at a pass
boundary (the decoder calls ``pause()`` once a pass). Calls share the computing slot by the
time each has computed for each of its rows, least first (every row, a client's choice, gets
an equal share): a new call, which has computed nothing, takes the slot once the computing
call has had :data:`SLICE_S` (when it holds jobs of other settings than the computing call's:
jobs of its own settings queue behind it, to share a call), and a paused call takes it back
once the computing one has computed :data:`SLICE_S` a row more than it. A short request is
so not held up by a long one, and a long one advances whenever none is waiting. At most
:data:`MAX_CALLS` calls exist at once. A job whose call has run for ``budget_s`` (paused time
included) leaves it (its rows are cancelled) and fails with :class:`OverBudget`.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from unmask.serve.jobs import Job

#: a group's decoder: (jobs, report, pause) -> one result list per job; ``report(job, row,
#: ids)`` gives a streaming job's committed ids of one row; ``pause()``, called once a pass,
#: blocks while another call runs in its place
DecodeFn = Callable[[list[Job], Callable[[Job, int, list[int]], None], Callable[[], None]],
                    list[list]]


#: calls a waiting job may see go to other settings before its own go next
MAX_PASSED_OVER = 3
#: seconds a call computes before another takes the slot (module docstring); calls that
#: exist at once
SLICE_S, MAX_CALLS = 0.05, 4


class OverBudget(Exception):
    """A job's call ran past the decode budget; its rows left the call."""


@dataclass(eq=False)
class _Call:
    """A decode call in progress: its jobs' ``settings`` and ``jobs``; ``computing``, the
    batcher's lock (held by the call that computes); ``gate``, set while it may compute;
    ``served``, seconds it computed before ``since`` (event-loop time it last took the
    slot)."""

    settings: object
    jobs: list
    computing: threading.Lock
    served: float = 0.0
    since: float = 0.0
    gate: threading.Event = field(default_factory=threading.Event)

    def pause(self) -> None:
        """The decoder's pause point: while the gate is closed, let another call compute."""
        if not self.gate.is_set():
            self.computing.release()
            try:
                self.gate.wait()
            finally:
                self.computing.acquire()

    @property
    def rows(self) -> int:
        """The rows it still decodes for someone (at least 1)."""
        return max(1, sum(len(j.rows) for j in self.jobs if not j.cancelled))

    @property
    def gone(self) -> bool:
        """Every job has left (cancelled, or past the budget): it should finish at once."""
        return all(j.cancelled for j in self.jobs)


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
    over_budget: bool = False


class Batcher:
    """Queues jobs and decodes compatible ones together (module docstring).

    decode: the group decoder (:func:`unmask.serve.decoding.decode_jobs` bound to a model);
    max_batch: rows per call; wait_s: the batch window; max_rows: rows waiting or decoding;
    budget_s: seconds a job's call may run before the job leaves it (None: no budget).
    """

    def __init__(self, decode: DecodeFn, *, max_batch: int, wait_s: float, max_rows: int,
                 budget_s: float | None = None):
        self.decode, self.max_batch, self.wait_s, self.max_rows = (decode, max_batch, wait_s,
                                                                   max_rows)
        self.budget_s = budget_s
        #: the calls in progress, oldest first; the one that holds the computing slot
        self.running: list[_Call] = []
        self.computing: _Call | None = None
        self.pending: list[Ticket] = []
        self.rows_held = 0
        #: the last decode calls: {"jobs", "rows", "passes" (the most any row took), "wall_s"}
        self.calls: deque[dict] = deque(maxlen=256)
        self.totals = {"decode_calls": 0, "rows_decoded": 0}
        self._wake: asyncio.Event | None = None
        self._task: asyncio.Task | None = None
        self._pool = ThreadPoolExecutor(MAX_CALLS, thread_name_prefix="unmask-decode")
        self._computing = threading.Lock()
        self._free_since = 0.0  # event-loop time the last call ended

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
        for c in self.running:
            c.gate.set()  # (their threads end with the pool)
        self._pool.shutdown(wait=False, cancel_futures=True)

    async def _run(self) -> None:
        while True:
            switch = self._share()
            start = self._until_free() if self.pending else float("inf")
            if start > 0:
                self._wake.clear()
                wait = min(switch, start)
                try:
                    await asyncio.wait_for(self._wake.wait(),
                                           None if wait == float("inf") else wait)
                except asyncio.TimeoutError:
                    pass
                continue
            group = []
            try:
                group = await self._gather()
                if group:
                    self._start(group)
            except Exception as e:  # noqa: BLE001 - the batcher outlives any one call
                for t in group:
                    if not t.result.done():
                        t.result.set_exception(e)
                        t.result.exception()

    def _switch(self, call: _Call | None) -> None:
        """Give the computing slot to ``call`` (the computing call pauses at its next pass)."""
        now, current = asyncio.get_running_loop().time(), self.computing
        if current is call:
            return
        if current is not None:
            current.served += now - current.since
            current.gate.clear()
        self.computing = call
        if call is not None:
            call.since = now
            call.gate.set()

    def _share(self) -> float:
        """Hand the slot to the paused call that has computed least per row (one whose jobs
        are all gone first) when nothing computes or the computing call has computed
        :data:`SLICE_S` a row more; seconds until that is next due (inf: no paused call)."""
        paused = [c for c in self.running if c is not self.computing]
        if not paused:
            return float("inf")
        least = min(paused, key=lambda c: (not c.gone, c.served / c.rows))
        current = self.computing
        if current is None and self.pending and not least.gone \
                and len(self.running) < MAX_CALLS:
            return float("inf")  # a new call, which has computed nothing, goes first
        if current is None or least.gone:
            self._switch(least)
            return 0.0 if len(paused) > 1 else float("inf")
        served = current.served + asyncio.get_running_loop().time() - current.since
        ahead = served / current.rows - least.served / least.rows  # seconds a row
        if ahead < SLICE_S:
            return (SLICE_S - ahead) * current.rows
        self._switch(least)
        return SLICE_S

    def _until_free(self) -> float:
        """Seconds until a new call may start: 0 with nothing computing, else once the
        computing call has had its slice, when jobs of other settings wait (inf while none
        do, or at :data:`MAX_CALLS` calls)."""
        if self.computing is None:
            return 0.0 if len(self.running) < MAX_CALLS else float("inf")
        if len(self.running) >= MAX_CALLS or not self._eligible():
            return float("inf")
        return max(0.0, self.computing.since + SLICE_S - asyncio.get_running_loop().time())

    def _start(self, group: list[Ticket]) -> None:
        """Run ``group``'s call; it takes the computing slot."""
        loop = asyncio.get_running_loop()
        call = _Call(group[0].job.settings, [t.job for t in group], self._computing)
        self.running.append(call)
        self._switch(call)
        expiry = None if self.budget_s is None else loop.call_later(
            self.budget_s, self._expire, group)
        task = loop.create_task(self._decode(group, call))

        def ended(_task) -> None:
            if expiry is not None:
                expiry.cancel()
            self.running.remove(call)
            if self.computing is call:
                self.computing = None
            self._share()
            self._wake.set()

        task.add_done_callback(ended)

    def _expire(self, group: list[Ticket]) -> None:
        """The budget is spent: the group's jobs leave their call and fail."""
        for t in group:
            if not t.result.done():
                t.over_budget = True
                t.job.cancelled = True
        self._wake.set()  # a paused call whose jobs are gone finishes first

    async def _gather(self) -> list[Ticket]:
        """Wait out the oldest job's window (or until its batch is full), then take its
        batch from the queue."""
        loop = asyncio.get_running_loop()
        opener = self._eligible()[0]
        key = opener.job.settings
        deadline = max(opener.arrived, self._free_since) + self.wait_s
        while self._rows(key) < self.max_batch and (left := deadline - loop.time()) > 0:
            self._wake.clear()
            try:
                await asyncio.wait_for(self._wake.wait(), left)
            except asyncio.TimeoutError:
                break
            if opener not in self.pending:
                return []  # the opener was cancelled: start again from the new oldest
        if not self._eligible():
            return []  # the call that held these settings ended: start again
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
        eligible = self._eligible()
        oldest = eligible[0]
        if oldest.passed_over >= MAX_PASSED_OVER:
            return oldest.job.settings
        rows: dict = {}
        for t in eligible:
            rows[t.job.settings] = rows.get(t.job.settings, 0) + len(t.job.rows)
        return max(rows, key=lambda k: min(rows[k], self.max_batch))  # first max: oldest

    def _eligible(self) -> list[Ticket]:
        """The waiting jobs the next call may take: all of them, or while a call computes,
        those of other settings (its own queue behind it)."""
        if self.computing is None:
            return self.pending
        return [t for t in self.pending if t.job.settings != self.computing.settings]

    def _rows(self, key) -> int:
        return sum(len(t.job.rows) for t in self.pending if t.job.settings == key)

    async def _decode(self, group: list[Ticket], me: _Call) -> None:
        loop = asyncio.get_running_loop()
        owner = {id(t.job): t for t in group}

        def report(job: Job, row: int, ids: list[int]) -> None:
            ticket = owner[id(job)]
            if ticket.blocks is not None:
                loop.call_soon_threadsafe(ticket.blocks.put_nowait,
                                          ("blocks", ticket, row, ids))

        started = time.perf_counter()
        call = {"jobs": len(group), "rows": sum(len(t.job.rows) for t in group), "passes": 0}
        def work() -> list[list]:
            with self._computing:  # a paused call lets go of it at its pause point
                return self.decode([t.job for t in group], report, me.pause)

        try:
            results = await loop.run_in_executor(self._pool, work)
        except Exception as e:  # noqa: BLE001 - every waiting request gets the error
            for t in group:
                if not t.result.done():
                    t.result.set_exception(e)
                    t.result.exception()  # retrieved here: a gone client never reads it
        else:
            call["passes"] = max((getattr(g, "nfe", 0) for rows in results for g in rows),
                                 default=0)
            for t, rows in zip(group, results, strict=True):
                if t.result.done():
                    continue
                if t.over_budget:
                    t.result.set_exception(OverBudget(
                        f"the request ran past the server's decode budget of "
                        f"{self.budget_s:g} s; ask for fewer tokens or a cheaper sampler"))
                    t.result.exception()
                else:
                    t.result.set_result(rows)
        finally:
            self._free_since = loop.time()
            self.rows_held -= call["rows"]
            self.totals["decode_calls"] += 1
            self.totals["rows_decoded"] += call["rows"]
            self.calls.append({**call, "wall_s": round(time.perf_counter() - started, 4)})
