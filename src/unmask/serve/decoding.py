"""One decode call over several compatible jobs: the path of :func:`unmask.generate.generate`
and :func:`unmask.infill.infill` (their batch layouts, EOS rules and result readers), with one
seed per row, block-by-block progress for streaming and rows that can be cancelled.

A row decodes exactly as it would alone (also beside rows under other constraints or
none: each row's constraint is its own, :class:`~unmask.constraints.dfa.DFAConstraint`):
:func:`unmask.decode.decode` gives each row its own random stream (its seed), and the jobs
of one call share every setting and the row width (:class:`~unmask.serve.jobs.Settings`), so
a row's prompt sits at the same positions as when it is decoded alone by
``generate(prompt, seed=its seed, pad_to_multiple_of=M)`` (M: the server's
``pad_to_multiple_of``, by default the block, so that prompts of other lengths share a call).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import ClassVar

import torch

from unmask.decode import DecodeConfig, decode
from unmask.generate import Generation, text_constraint
from unmask.hooks import Hook
from unmask.samplers.base import Selection, StepState
from unmask.samplers.wrapper import SamplerWrapper
from unmask.serve.jobs import Job, ServedModel


@dataclass
class CancelRows(SamplerWrapper):
    """``inner``, except that rows named by ``cancelled()`` (indices into the decoded batch)
    reveal every eligible position at once with the loop's proposal: a cancelled row leaves
    the batch after one pass per block it has left, and the other rows are untouched (each
    row's choice is its own); once all ``rows`` of the batch are cancelled, ``inner`` is no
    longer asked. ``pause()`` is called at the start of every pass (the batcher holds a call
    there while another runs). No host read."""

    cancelled: Callable[[], list[int]] = field(default=list)
    pause: Callable[[], object] = field(default=lambda: None)
    rows: int | None = None

    def select(self, state: StepState) -> Selection:
        self.pause()
        gone = self.cancelled()
        if gone and len(gone) == self.rows:
            return Selection(state.eligible, tokens=state.x0)
        sel = self.inner.select(state)
        if not gone:
            return sel
        ended = torch.isin(state.row_ids, torch.tensor(gone, device=state.row_ids.device))
        tokens = state.x0 if sel.tokens is None else sel.tokens
        reveal = torch.where(ended[:, None], state.eligible, sel.reveal)
        tokens = torch.where(ended[:, None], state.x0, tokens)
        return replace(sel, reveal=reveal, tokens=tokens)


class BlockWatch(Hook):
    """Reports each watched row's generated blocks as they are committed (hold no MASK), in
    order: ``report(row, ids)`` with the generated ids of the committed blocks so far.

    It reads the tokens the loop holds at each pass (before the pass's write), so a block is
    reported one pass after it is filled; the last ones come with the decode's result. It
    changes nothing (``rewrites`` False: the loop still follows the rows' blocks) and reads no
    per-position value (``reads_eligible_only``): one host read a pass (whether a watched
    row's committed blocks grew), and one more at a pass where one did.
    """

    reads_eligible_only: ClassVar[bool] = True

    def __init__(self, rows: list[int], gen_start: int, block: int,
                 report: Callable[[int, list[int]], None]):
        self.rows, self.gen_start, self.block, self.report = rows, gen_start, block, report

    def prepare(self, model, sampler, tokens):
        self.watch = torch.tensor(self.rows, dtype=torch.long, device=tokens.device)
        #: (B,) the committed blocks reported so far, by row of the decode
        self.sent = torch.zeros(tokens.shape[0], dtype=torch.long, device=tokens.device)

    def after_write(self, rows, state, remask):
        gen = state.tokens[:, self.gen_start:]  # (R, G)
        masked = (gen == state.mask_id).view(len(rows), -1, self.block).any(-1)  # (R, blocks)
        done = torch.where(masked.any(1), masked.long().argmax(1), masked.shape[1])  # (R,)
        grew = torch.isin(rows, self.watch) & (done > self.sent[rows])
        if not grew.any():  # the one read a pass
            return remask
        picked = grew.nonzero().squeeze(1)
        self.sent[rows[picked]] = done[picked]
        p, g = len(picked), gen.shape[1]
        values = torch.cat([rows[picked], done[picked], gen[picked].flatten()]).tolist()
        for k in range(p):  # row, its committed blocks, its generated ids
            n = values[p + k] * self.block
            self.report(values[k], values[2 * p + k * g:2 * p + k * g + n])
        return remask


@dataclass
class Call:
    """How a group of jobs decodes: its input, sampler, loop settings and result reader."""

    x: torch.Tensor
    ends: object
    sampler: object
    config: DecodeConfig
    read: Callable[[object, float], list[Generation]]


def _call(served: ServedModel, jobs: list[Job]) -> Call:
    """The call of ``jobs`` (equal settings): their layout's input, and the sampler and loop
    settings of their one request (a completion's request names its block)."""
    s = jobs[0].settings
    layout, n_blocks = s.layout.layout(served, s.request,
                                       [ids for job in jobs for ids in job.rows],
                                       [t for job in jobs for t in job.texts])
    x, ends = layout.batch(layout.encoded)
    return Call(x, ends, s.request.build_sampler(n_blocks),
                s.request.decode_config(s.request.block_length),
                lambda res, wall: layout.read(res, 0, ends, wall))


def decode_jobs(served: ServedModel, jobs: list[Job],
                report: Callable[[Job, int, list[int]], None] | None = None,
                pause: Callable[[], object] | None = None) -> list[list[Generation]]:
    """Decode ``jobs`` (equal :class:`~unmask.serve.jobs.Settings`) in one call; one list of
    :class:`~unmask.generate.Generation` per job, a row each.

    ``report(job, i, ids)``: the generated ids of row ``i`` of a streaming ``job`` whenever
    its committed blocks grow. A job whose ``cancelled`` is set is dropped from the call
    within one pass per block it has left (its results are still returned). ``pause()``:
    called once a pass (:class:`CancelRows`).
    """
    call = _call(served, jobs)
    owner = [(job, i) for job in jobs for i in range(len(job.rows))]
    seeds = torch.tensor([s for job in jobs for s in job.seeds], dtype=torch.long)
    hooks = [] if call.ends is None else list(call.ends.hooks())
    watched = [r for r, (job, _) in enumerate(owner) if job.stream]
    if report is not None and watched and call.ends is not None:
        hooks.append(BlockWatch(watched, call.ends.gen_start, call.config.block_size,
                                lambda r, ids: report(owner[r][0], owner[r][1], ids)))

    def cancelled() -> list[int]:
        return [r for r, (job, _) in enumerate(owner) if job.cancelled]

    sampler = call.sampler if call.ends is None else call.ends.sampler(call.sampler)
    t0 = time.perf_counter()
    wrapped = CancelRows(sampler, cancelled, pause or (lambda: None), rows=len(owner))
    specs = [job.constraint for job, _ in owner]
    con = (None if all(c is None for c in specs)
           else text_constraint(served.model, call.x, call.ends, specs))
    res = decode(served.model, call.x.to(served.model.device), wrapped, call.config,
                 seed=seeds, hooks=hooks, constraint=con)
    rows = call.read(res, time.perf_counter() - t0)
    for r, gen in enumerate(rows if con is not None else ()):
        gen.constraint = con.record(r, res.stats)
    out, at = [], 0
    for job in jobs:
        out.append(rows[at:at + len(job.rows)])
        at += len(job.rows)
    return out
