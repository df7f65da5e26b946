"""The one constraint protocol of the decode loop, and the hook that applies a constraint.

A :class:`Constraint` says, for a canvas of tokens with MASK where nothing is decided yet,
which tokens each masked position may take (``allowed``) and whether the canvas can still be
completed (``feasible``). :class:`Constrain` is the decode hook that applies one: it masks
the log-probabilities before the sampler chooses (every sampler sees only allowed tokens, its
entropies and confidences those of the renormalised distribution) and, after the sampler
chose its set for the pass, keeps the largest prefix of that set, in order of the loop's
confidence in the written token (ties by position), that is feasible together; the rest stay
masked for a later pass. Two implementations: the token automaton of a regular expression or
JSON Schema (:class:`~unmask.constraints.dfa.DFAConstraint`, exact) and the Sudoku rules
(``unmask.sudoku.rules``, not exact: it can reach a dead end).
"""

from __future__ import annotations

import math
from typing import ClassVar, Protocol, runtime_checkable

import torch

from unmask.hooks import Hook
from unmask.samplers.base import Selection, StepState


@runtime_checkable
class Constraint(Protocol):
    """What the decode loop asks of a constraint. Shapes: R rows, N positions, V tokens;
    ``rows`` (R,) are indices into the batch given to ``decode``."""

    def prepare(self, model, tokens: torch.Tensor) -> None:
        """Called once before the first pass with the batch's (B, N) tokens on the model's
        device: compile, move to the device, and refuse (UnmaskError, one line) a batch that
        cannot be completed."""

    def allowed(self, tokens: torch.Tensor, rows: torch.Tensor, columns: slice
                ) -> torch.Tensor:
        """(R, W, V) bool: the tokens each position of ``columns`` (W wide) may take given the
        canvas ``tokens`` (R, N) (any token where a position is not masked)."""

    def feasible(self, tokens: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
        """(R,) bool: whether the canvas ``tokens`` (R, N) can still be completed."""

    # optional: bound_rows(rows) -> (R,) bool, the rows the constraint applies to (others
    # pass through bit for bit); without it, every row


class Constrain(Hook):
    """Apply ``constraint`` to every pass (see the module's docstring).

    A masked position with no allowed token (a dead end, possible with an inexact constraint)
    ends its row: from that pass the row decodes unconstrained, one whole block per pass, and
    ``stats["dead_end"]`` is 1 for it. Reports ``stats["cut_passes"]`` (B,): passes whose
    selection was cut to a jointly feasible prefix.
    """

    reads_eligible_only: ClassVar[bool] = True

    def __init__(self, constraint: Constraint):
        self.constraint = constraint
        self.dead = self.cuts = torch.zeros(0, dtype=torch.long)

    def prepare(self, model, sampler, tokens):
        self.constraint.prepare(model, tokens)
        self.live, self.mask_id = tokens, model.mask_id
        self.dead = torch.zeros(tokens.shape[0], dtype=torch.bool, device=tokens.device)
        self.cuts = torch.zeros(tokens.shape[0], dtype=torch.long, device=tokens.device)

    def adjust_log_probs(self, rows, log_probs, columns=slice(0, None)):
        cols = slice(columns.start or 0, (columns.start or 0) + log_probs.shape[1])
        x = self.live[rows]
        out = log_probs.masked_fill(~self.constraint.allowed(x, rows, cols), -math.inf)
        total = out.logsumexp(-1, keepdim=True)  # (R, W, 1): -inf where nothing is left
        masked = x[:, cols] == self.mask_id
        dead = self.dead[rows] | (masked & (total[..., 0] == -math.inf)).any(1)
        self.dead[rows] = dead
        # renormalised in the rows a constraint applies to; the others (no constraint, or a
        # dead end) keep their bits: a row without one decodes as it does alone
        bound = getattr(self.constraint, "bound_rows", None)
        use = ~dead if bound is None else bound(rows) & ~dead
        return torch.where(use[:, None, None], out - total, log_probs)

    def adjust_selection(self, state: StepState, sel: Selection, new: torch.Tensor):
        rows, x = state.row_ids, state.tokens
        dead = self.dead[rows]
        reveal = sel.reveal & ~dead[:, None]
        # the order: the loop's confidence in the written token, ties by position
        n = x.shape[1]
        score = torch.where(reveal, state.x0_prob.double(), -math.inf)
        order = torch.sort(score, dim=1, descending=True, stable=True).indices
        rank = torch.empty_like(order).scatter_(1, order, torch.arange(n, device=x.device)
                                                .expand_as(order))
        count = reveal.sum(1)
        keep = _largest_feasible(self.constraint, rows, x, reveal, rank, count, new)
        cut = keep < count
        self.cuts[rows] += cut.long()
        reveal = (reveal & (rank < keep[:, None])) | (dead[:, None] & state.eligible)
        new = torch.where(dead[:, None], torch.where(sel.reveal, new, state.x0), new)
        self.dead[rows] = dead | (keep == 0) & (count > 0)
        stale = sel.stale
        if sel.next_output is not None:
            stale = cut | dead if stale is None else stale | cut | dead
        return Selection(reveal, new, next_output=sel.next_output, entropy=sel.entropy,
                         stale=stale), new

    def stats(self):
        return {"cut_passes": self.cuts, "dead_end": self.dead.long()}


def _largest_feasible(constraint: Constraint, rows, x, reveal, rank, count, new,
                      ways: int = 8) -> torch.Tensor:
    """(R,) the largest k <= count such that writing the reveals of rank < k is feasible:
    a search over k that tests ``ways - 1`` counts per row at once (feasibility is monotone:
    more written tokens never make a canvas completable again), about log_ways(N) rounds
    (fixed by N: no host read)."""
    r, n = x.shape
    lo = torch.zeros_like(count)  # feasible (nothing written)
    hi = count.clone()            # the answer is in [lo, hi]
    steps = torch.arange(1, ways, device=x.device)
    for _ in range(_rounds(n, ways)):
        width = hi - lo
        ks = lo[:, None] + (width[:, None] * steps + ways - 1) // ways   # (R, ways-1)
        write = reveal[:, None, :] & (rank[:, None, :] < ks[..., None])  # (R, ways-1, N)
        cand = torch.where(write, new[:, None, :], x[:, None, :]).reshape(-1, n)
        ok = constraint.feasible(cand, rows.repeat_interleave(ways - 1)).view(r, ways - 1)
        ok = ok & (ks <= hi[:, None])
        best = torch.where(ok, ks, lo[:, None]).amax(1)
        bad = torch.where(~ok & (ks > best[:, None]), ks - 1, hi[:, None]).amin(1)
        lo, hi = best, torch.minimum(hi, bad)
    return lo


def _rounds(n: int, ways: int) -> int:
    """Rounds of :func:`_largest_feasible` that leave no doubt for up to ``n`` reveals: a
    round tests every open count when fewer than ``ways`` are open, else leaves at most
    ceil(w / ways) of w open."""
    rounds, width = 0, n
    while width > 0:
        width = 0 if width < ways else math.ceil(width / ways)
        rounds += 1
    return rounds


def constraint_hook(constraint) -> Constrain:
    """The :class:`Constrain` hook of a :class:`~unmask.constraints.spec.ConstraintSpec`
    (its token automaton over every position of the rows) or of a :class:`Constraint`."""
    from unmask.constraints.dfa import DFAConstraint
    from unmask.constraints.spec import ConstraintSpec
    from unmask.errors import require

    if isinstance(constraint, ConstraintSpec):
        constraint = DFAConstraint(constraint)
    require(isinstance(constraint, Constraint),
            f"constraint: expected a ConstraintSpec or a Constraint, got "
            f"{type(constraint).__name__}")
    return Constrain(constraint)
