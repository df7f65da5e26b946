"""Lookahead samplers: propose candidate actions, evaluate every candidate's next state in one
batched model call, commit the best, and hand its model output to the loop as the next step's.

An action a is a set of (position, token) pairs. With Hbar(z) the mean entropy (nats) of the
masked positions of state z (the whole sequence, not only the current block):

    C(a) = sum_{l in a} H_l(z)                     immediate cost
    IG(a) = Hbar(z) - Hbar(apply(z, a))            information gain
    J(a) = IG(a) - cost_weight * C(a)

Info-Gain is cost_weight = 1, LookUM is cost_weight = 0 (J = IG, the same argmax as
-Hbar(apply(z, a))). The winner's lookahead output is exactly the model on the next state, so a
step costs one batched call: NFE matches sequential decoding, while ``sequences`` counts every
candidate evaluated.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import ClassVar

import torch

from unmask.errors import require
from unmask.models.base import ModelOutput
from unmask.probs import entropy_from_log_probs, real_log_probs
from unmask.samplers.base import CountRule, Sampler, Selection, StepState, top_k_mask
from unmask.validation import is_int, is_number

REMAINING = ("mean", "sum")


@dataclass
class Candidates:
    """Candidate actions of one step, C per row.

    reveal: (B, C, N) bool, the positions each candidate reveals.
    tokens: (B, C, N) long, the state after the action (apply(z, a_c)).
    valid: (B, C) bool, candidates to consider: the first of each distinct next state (c = 0
        is always valid); a bypassing row keeps only c = 0.
    cost: (B, C) C(a_c) in nats.
    """

    reveal: torch.Tensor
    tokens: torch.Tensor
    valid: torch.Tensor
    cost: torch.Tensor


@dataclass
class LookaheadStep:
    """Everything one lookahead step computed (for tests and diagnostics).

    candidates: the proposals; bypass: (B,) rows that revealed confident positions directly.
    hbar: (B,) Hbar(z); hbar_next: (B, C) Hbar(apply(z, a_c)) (NaN where not evaluated).
    objective: (B, C) J(a_c) (-inf where invalid); winner: (B,) index of the committed one.
    next_output: the model on each row's next state (None when every row finished).
    """

    candidates: Candidates
    bypass: torch.Tensor
    hbar: torch.Tensor
    hbar_next: torch.Tensor
    objective: torch.Tensor
    winner: torch.Tensor
    next_output: ModelOutput | None


def mean_or_sum(entropy: torch.Tensor, masked: torch.Tensor, remaining: str) -> torch.Tensor:
    """(...,) mean (or sum) of entropy (..., N) over masked (..., N); 0 where none is masked."""
    total = torch.where(masked, entropy.double(), 0.0).sum(-1)
    if remaining == "sum":
        return total
    return total / masked.sum(-1).clamp(min=1)


@dataclass
class LookaheadSampler(CountRule, Sampler):
    """Shared machinery of Info-Gain and LookUM (see the module docstring).

    k, steps, schedule: tokens per action (:class:`CountRule`; k = 1 by default).
    n_candidates: candidate actions per step before de-duplication. c = 0 is the greedy
        action (the loop's proposed tokens on the top-k confidence positions); each c > 0
        re-draws the tokens at ``tau_tok`` and picks positions as the top-k of
        p(token)/tau_pos + Gumbel noise.
    tau_tok: token temperature of candidates c > 0; None uses the loop's temperature
        (0 = the argmax, so candidates then differ only in positions).
    tau_pos: position temperature; 0 keeps the top-k confidence positions in every candidate.
    bypass: if not None, a row whose eligible max-probability reaches it reveals every
        eligible position at or above it directly (no candidates beyond that one). Off by
        default.
    remaining: 'mean' (Hbar as defined) or 'sum' (total entropy left).
    prune: if not None, a row whose greedy action costs at most this many nats
        (C(a_0) <= prune: its positions are near certain) commits it without evaluating the
        other candidates.
    keep: if not None, at most this many candidates per row are evaluated: the greedy one and
        the cheapest others by C(a) (bounds sequences per pass at ``keep``).
    """

    cost_weight: ClassVar[float] = 1.0
    evaluates_next_state: ClassVar[bool] = True

    n_candidates: int = 8
    tau_tok: float | None = None
    tau_pos: float = 0.2
    bypass: float | None = None
    remaining: str = "mean"
    prune: float | None = None
    keep: int | None = None

    def __post_init__(self):
        super().__post_init__()
        require(is_int(self.n_candidates) and self.n_candidates >= 1,
                f"n_candidates: must be an integer >= 1, got {self.n_candidates}")
        require(self.tau_tok is None or self.tau_tok >= 0,
                f"tau_tok: must be None or >= 0, got {self.tau_tok}")
        require(self.tau_pos >= 0, f"tau_pos: must be >= 0, got {self.tau_pos}")
        require(self.bypass is None or 0.0 <= self.bypass <= 1.0,
                f"bypass: must be None or in [0, 1], got {self.bypass}")
        require(self.remaining in REMAINING,
                f"remaining: expected one of {REMAINING}, got {self.remaining!r}")
        require(self.prune is None or (is_number(self.prune) and self.prune >= 0),
                f"prune: must be None or a number >= 0, got {self.prune!r}")
        require(self.keep is None or (is_int(self.keep) and self.keep >= 1),
                f"keep: must be None or an integer >= 1, got {self.keep!r}")

    # ------------------------------------------------------------------ candidates

    def propose(self, state: StepState) -> Candidates:
        """Candidate actions (B, C, N) for the rows of ``state``; vectorised over rows."""
        b, n = state.tokens.shape
        c = self.n_candidates
        k = self.count(state)  # (B,)
        tokens = state.x0[:, None, :].expand(b, c, n).clone()
        tau_tok = state.temperature if self.tau_tok is None else self.tau_tok
        if c > 1 and tau_tok > 0:
            tokens[:, 1:] = self._draw_tokens(state, tau_tok, c - 1)
        conf = state.probs.double().gather(-1, tokens.transpose(1, 2)).transpose(1, 2)  # (B,C,N)
        conf[:, 0] = state.x0_prob.double()  # the greedy candidate ranks as the loop does
        scores = conf.clone()
        if c > 1 and self.tau_pos > 0:
            scores[:, 1:] = conf[:, 1:] / self.tau_pos + state.gumbel(2, (c - 1, n))
        eligible = state.eligible[:, None, :].expand(b, c, n)
        reveal = top_k_mask(scores.reshape(b * c, n), eligible.reshape(b * c, n),
                            k.repeat_interleave(c)).view(b, c, n)
        nxt = torch.where(reveal, tokens, state.tokens[:, None, :])
        # a candidate is a duplicate when an earlier one leads to the same next state
        same = (nxt[:, :, None, :] == nxt[:, None, :, :]).all(-1)  # (B, C, C)
        earlier = torch.ones(c, c, dtype=torch.bool, device=same.device).tril(-1)
        valid = ~(same & earlier).any(-1)
        cost = torch.where(reveal, state.entropy.double()[:, None, :], 0.0).sum(-1)
        return Candidates(reveal=reveal, tokens=nxt, valid=valid, cost=cost)

    @staticmethod
    def _draw_tokens(state: StepState, tau: float, m: int) -> torch.Tensor:
        """(B, m, N) tokens drawn from p^(1/tau) by inverse CDF on per-row uniforms."""
        cdf = torch.softmax(state.log_probs.double() / tau, dim=-1).cumsum(-1)  # (B, N, V)
        # u in (0, 1) scaled by the total: the first index whose cdf reaches it has p > 0
        u = state.uniform(1, (state.tokens.shape[1], m)) * cdf[..., -1:]  # (B, N, m)
        return torch.searchsorted(cdf, u).clamp(max=cdf.shape[-1] - 1).transpose(1, 2)

    def _apply_bypass(self, state: StepState, cands: Candidates) -> torch.Tensor:
        """Rows whose max-probability clears ``bypass`` reveal all such positions as c = 0."""
        b = state.tokens.shape[0]
        if self.bypass is None:
            return torch.zeros(b, dtype=torch.bool, device=state.tokens.device)
        sure = (state.x0_prob >= self.bypass) & state.eligible  # (B, N)
        rows = sure.any(1)
        # every row rewritten where it bypasses (no host read)
        cands.reveal[:, 0] = torch.where(rows[:, None], sure, cands.reveal[:, 0])
        cands.tokens[:, 0] = torch.where(rows[:, None], torch.where(sure, state.x0,
                                                                    state.tokens),
                                         cands.tokens[:, 0])
        cands.valid[:, 1:] &= ~rows[:, None]
        cost = torch.where(sure, state.entropy.double(), 0.0).sum(-1)
        cands.cost[:, 0] = torch.where(rows, cost, cands.cost[:, 0])
        return rows

    def _prune(self, cands: Candidates) -> None:
        """Drop candidates (``valid``) by ``prune`` and ``keep``; the greedy one stays."""
        if self.prune is not None:
            cands.valid[:, 1:] &= (cands.cost[:, :1] > self.prune)
        if self.keep is not None and cands.valid.shape[1] > self.keep:
            cost = cands.cost.masked_fill(~cands.valid, torch.inf)
            cost[:, 0] = -torch.inf
            rank = cost.argsort(dim=1, stable=True).argsort(dim=1)
            cands.valid &= rank < self.keep

    # ------------------------------------------------------------------ one step

    def score(self, state: StepState) -> LookaheadStep:
        """Propose, evaluate all candidates in one batched call, and pick the best per row."""
        cands = self.propose(state)
        bypass = self._apply_bypass(state, cands)
        self._prune(cands)
        b, c, n = cands.tokens.shape
        next_masked = cands.tokens == state.mask_id  # (B, C, N)
        # a finished next state needs no model call: nothing is left to be uncertain about
        need = cands.valid & next_masked.any(-1)
        hbar_next = torch.full((b, c), torch.nan, dtype=torch.float64,
                               device=state.tokens.device)
        hbar_next[cands.valid & ~need] = 0.0
        out = None
        if bool(need.any()):
            rows = state.row_ids[:, None].expand(b, c)[need]
            out = state.model(cands.tokens[need], rows)
            real = state.real_mask.to(out.logits.device)
            lp = real_log_probs(out.logits, real)
            out = dataclasses.replace(out, log_probs=lp)  # the loop's, if it wins
            ent = entropy_from_log_probs(lp)  # (M, N)
            hbar_next[need] = mean_or_sum(ent, next_masked[need], self.remaining)
        hbar = mean_or_sum(state.entropy, state.masked, self.remaining)
        objective = hbar[:, None] - hbar_next - self.cost_weight * cands.cost
        objective = objective.masked_fill(~cands.valid, -torch.inf)
        winner = objective.argmax(1)  # first maximum: ties go to the greedy candidate
        next_output = None
        if out is not None:
            # rows whose winner finished the sequence leave the loop; their entry is unused
            next_output = out.pick(need, winner)
        return LookaheadStep(candidates=cands, bypass=bypass, hbar=hbar, hbar_next=hbar_next,
                             objective=objective, winner=winner, next_output=next_output)

    def select(self, state: StepState) -> Selection:
        step = self.score(state)
        idx = step.winner[:, None, None].expand(-1, 1, state.tokens.shape[1])
        reveal = step.candidates.reveal.gather(1, idx).squeeze(1)
        tokens = step.candidates.tokens.gather(1, idx).squeeze(1)
        return Selection(reveal, tokens, next_output=step.next_output)
