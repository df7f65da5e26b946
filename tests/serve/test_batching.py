"""The batcher alone, with a recording decoder (no model): which jobs share a call, which
settings go first, the bound on rows, cancellation and errors."""

import asyncio

import pytest

from unmask.serve.batching import MAX_PASSED_OVER, Batcher, Busy
from unmask.serve.jobs import Job, Settings


def job(kind: str, rows: int = 1) -> Job:
    settings = Settings("generate", kind, 8, 8, None, 0.0, 0, "draw", 16)
    return Job(settings, [[1, 2]] * rows, ["p"] * rows, list(range(rows)))


class Recorder:
    """A decoder that records each call's jobs (their sampler names) and answers each row
    with its seed; ``gate`` holds the calls until set."""

    def __init__(self, fail: bool = False):
        self.calls: list[list[str]] = []
        self.fail = fail

    def __call__(self, jobs, report):
        self.calls.append([j.settings.sampler for j in jobs])
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
