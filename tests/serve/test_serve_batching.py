"""The batcher alone, with a recording decoder (no model): which jobs share a call, which
settings go first, the bound on rows, cancellation and errors."""

import asyncio
import time

import pytest

from unmask.request import DecodeRequest
from unmask.serve.batching import MAX_PASSED_OVER, SLICE_S, Batcher, Busy, OverBudget
from unmask.serve.jobs import Completion, Job, Settings

#: the test's names of settings -> a request each (equal names, equal requests)
KINDS = {"a": "confidence", "b": "entropy", "crowd": "margin", "lonely": "topk:k=2",
         "quick": "eb:gamma=0.1", "slow": "threshold:tau=0.9", "slow2": "threshold:tau=0.8",
         "mid": "topk:k=3"}
NAMES = {DecodeRequest(sampler=spec).sampler: name for name, spec in KINDS.items()}


def job(kind: str, rows: int = 1) -> Job:
    request = DecodeRequest(sampler=KINDS[kind], gen_length=8, block_length=8)
    return Job(Settings(request, Completion, 16), [[1, 2]] * rows, ["p"] * rows,
               list(range(rows)))


def kind_of(job: Job) -> str:
    return NAMES[job.settings.request.sampler]


class Recorder:
    """A decoder that records each call's jobs (their sampler names) and answers each row
    with its seed; ``gate`` holds the calls until set."""

    def __init__(self, fail: bool = False):
        self.calls: list[list[str]] = []
        self.fail = fail

    def __call__(self, jobs, report, pause=None):
        self.calls.append([kind_of(j) for j in jobs])
        if self.fail:
            raise RuntimeError("broken")
        return [list(j.seeds) for j in jobs]


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 60))


def test_jobs_with_equal_settings_within_the_window_share_a_call():
    async def main():
        rec = Recorder()
        b = Batcher(rec, max_batch=8, wait_s=0.2, max_rows=64)
        first = b.submit([job("a")])
        await asyncio.sleep(0.02)
        later = b.submit([job("a", 2), job("b")])
        rows = await asyncio.gather(*(t.result for t in first + later))
        return rec.calls, rows, b.rows_held

    calls, rows, held = run(main())
    assert calls == [["a", "a"], ["b"]] and rows == [[0], [0, 1], [0]] and held == 0


def test_a_full_batch_goes_without_waiting_out_the_window():
    async def main():
        rec = Recorder()
        b = Batcher(rec, max_batch=4, wait_s=3.0, max_rows=64)
        tickets = b.submit([job("a", 2), job("a", 2), job("a")])
        await asyncio.wait_for(asyncio.gather(*(t.result for t in tickets[:2])), 1.5)
        await asyncio.wait_for(tickets[2].result, 10)
        return rec.calls

    assert run(main())[0] == ["a", "a"]


def test_the_most_rows_go_first_and_no_job_is_passed_over_more_than_the_limit():
    async def main():
        rec = Recorder()
        b = Batcher(rec, max_batch=8, wait_s=0.0, max_rows=256)
        b.submit([job("lonely")])
        tickets = b.submit([job("crowd") for _ in range(3)])
        # the crowd keeps coming back (a closed loop of clients); "lonely" waits
        for _ in range(MAX_PASSED_OVER + 2):
            await asyncio.gather(*(t.result for t in tickets))
            tickets = b.submit([job("crowd") for _ in range(3)])
        await asyncio.gather(*(t.result for t in tickets))
        return rec.calls

    calls = run(main())
    lonely = next(i for i, c in enumerate(calls) if c == ["lonely"])
    assert calls[0] == ["crowd"] * 3 and lonely <= MAX_PASSED_OVER


def test_rows_are_bounded_and_cancelled_jobs_leave_the_queue():
    async def main():
        rec = Recorder()
        b = Batcher(rec, max_batch=4, wait_s=0.3, max_rows=4)
        kept = b.submit([job("a", 2)])
        gone = b.submit([job("a", 2)])
        with pytest.raises(Busy):
            b.submit([job("a")])
        b.cancel(gone)
        assert b.rows_held == 2 and gone[0].job.cancelled and gone[0].result.cancelled()
        assert await kept[0].result == [0, 1]
        return rec.calls, b.rows_held

    assert run(main()) == ([["a"]], 0)


def test_a_decode_error_reaches_every_job_of_the_call():
    async def main():
        b = Batcher(Recorder(fail=True), max_batch=4, wait_s=0.05, max_rows=16)
        tickets = b.submit([job("a"), job("a")])
        return await asyncio.gather(*(t.result for t in tickets), return_exceptions=True)

    assert [str(e) for e in run(main())] == ["broken", "broken"]


class Slow:
    """A decoder whose calls of sampler ``slow`` take ``passes`` passes of ``pass_s`` each
    (calling ``pause()`` before each, leaving early once every job is cancelled); others take
    one pass. Records (sampler, event) in order."""

    def __init__(self, passes: int = 40, pass_s: float = 0.02):
        self.passes, self.pass_s, self.log = passes, pass_s, []
        self.computing, self.most = 0, 0  # passes computing at once, now and at most

    def __call__(self, jobs, report, pause=lambda: None):
        kind = kind_of(jobs[0])
        self.log.append((kind, "start"))
        passes = self.passes.get(kind, 1) if isinstance(self.passes, dict) else (
            self.passes if kind == "slow" else 1)
        for _ in range(passes):
            pause()
            if all(j.cancelled for j in jobs):
                break
            self.computing += 1
            self.most = max(self.most, self.computing)
            time.sleep(self.pass_s)
            self.computing -= 1
        self.log.append((kind, "end"))
        return [list(j.seeds) for j in jobs]


def test_a_long_call_pauses_for_calls_of_other_settings():
    async def main():
        dec = Slow()
        b = Batcher(dec, max_batch=4, wait_s=0.0, max_rows=64)
        slow = b.submit([job("slow")])
        await asyncio.sleep(SLICE_S + 0.1)
        t0 = time.monotonic()
        quick = b.submit([job("quick")])
        await quick[0].result
        took = time.monotonic() - t0
        await slow[0].result
        return dec.log, took, b.running, dec.most

    log, took, running, most = run(main())
    assert log == [("slow", "start"), ("quick", "start"), ("quick", "end"), ("slow", "end")]
    assert running == [] and most == 1  # quick ran inside slow's call; never two passes at once


def test_jobs_of_the_computing_calls_settings_wait_for_it():
    async def main():
        dec = Slow(passes=20)
        b = Batcher(dec, max_batch=1, wait_s=0.0, max_rows=64)
        first = b.submit([job("slow")])
        await asyncio.sleep(0.01)
        second = b.submit([job("slow")])
        await asyncio.gather(first[0].result, second[0].result)
        return dec.log

    assert run(main()) == [("slow", "start"), ("slow", "end")] * 2


def test_a_call_past_the_budget_ends_its_jobs_with_an_error():
    async def main():
        dec = Slow(passes=10_000, pass_s=0.01)
        b = Batcher(dec, max_batch=4, wait_s=0.0, max_rows=64, budget_s=0.3)
        t0 = time.monotonic()
        tickets = b.submit([job("slow", 2)])
        out = await asyncio.gather(tickets[0].result, return_exceptions=True)
        return out[0], time.monotonic() - t0, tickets[0].job.cancelled, b.rows_held

    error, took, cancelled, held = run(main())
    assert isinstance(error, OverBudget) and "decode budget of 0.3 s" in str(error)
    assert cancelled and held == 0 and took < 20  # (10,000 passes would take 100 s)


def test_a_short_call_paused_by_a_newer_long_one_gets_the_slot_back():
    """Calls share the slot by time computed, least first: a 10-pass call that a newer
    40-pass call paused still ends long before it (not after it, as a stack would have it)."""
    async def main():
        dec = Slow(passes={"slow": 40, "slow2": 40, "mid": 10})
        b = Batcher(dec, max_batch=4, wait_s=0.0, max_rows=64)
        first = b.submit([job("slow")])
        await asyncio.sleep(SLICE_S * 3)
        mid = b.submit([job("mid")])
        await asyncio.sleep(SLICE_S * 1.5)
        later = b.submit([job("slow2")])
        await asyncio.gather(*(t.result for t in first + mid + later))
        return [e for e in dec.log if e[1] == "end"], dec.most

    ends, most = run(main())
    assert ends[0] == ("mid", "end") and most == 1
