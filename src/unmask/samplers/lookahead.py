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
from unmask.rng import row_gumbel
from unmask.samplers.base import CountRule, Sampler, Selection, StepState, top_k_mask
from unmask.validation import is_int, is_number, is_temperature, temperature_message

REMAINING = ("mean", "sum")
#: how the bypass decides (:class:`LookaheadSampler` ``bypass_rule``)
BYPASS_RULES = ("positions", "block")
#: what makes two candidates the same (``dedupe``)
DEDUPE = ("state", "positions")
#: how candidates c > 0 draw their tokens (``draw``)
DRAWS = ("cdf", "gumbel")


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
    evaluated: (B, C) bool, the candidates whose next state the batched call evaluated (the
        valid ones that still hold a MASK).
    """

    candidates: Candidates
    bypass: torch.Tensor
    hbar: torch.Tensor
    hbar_next: torch.Tensor
    objective: torch.Tensor
    winner: torch.Tensor
    next_output: ModelOutput | None
    evaluated: torch.Tensor | None = None


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
    bypass: if not None, a confidence level at which a row skips the search (no candidates
        beyond the one it commits); off by default. How, ``bypass_rule`` says.
    bypass_rule: 'positions': a row with an eligible position whose proposal probability
        (``StepState.x0_prob``) reaches ``bypass`` reveals every such position; 'block' (the
        Info-Gain authors' rule): a row whose every eligible position has a max-probability
        at or above ``bypass`` reveals all of them, its proposals filling the block at once.
    dedupe: 'state': a candidate leading to the same next state as an earlier one is dropped;
        'positions' (the authors'): one revealing the same positions as an earlier one is
        dropped, whatever its tokens (equal at temperature 0).
    draw: how candidates c > 0 draw their tokens at ``tau_tok``: 'cdf', by inverse CDF on one
        uniform per position; 'gumbel' (the authors'), the argmax of log p / tau_tok plus
        Gumbel noise per token, as the loop draws its own proposal.
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
    bypass_rule: str = "positions"
    dedupe: str = "state"
    draw: str = "cdf"

    def __post_init__(self):
        super().__post_init__()
        require(is_int(self.n_candidates) and self.n_candidates >= 1,
                f"n_candidates: must be an integer >= 1, got {self.n_candidates}")
        require(self.tau_tok is None or is_temperature(self.tau_tok),
                temperature_message("tau_tok", self.tau_tok))
        require(is_temperature(self.tau_pos), temperature_message("tau_pos", self.tau_pos))
        require(self.bypass is None or 0.0 <= self.bypass <= 1.0,
                f"bypass: must be None or in [0, 1], got {self.bypass}")
        require(self.remaining in REMAINING,
                f"remaining: expected one of {REMAINING}, got {self.remaining!r}")
        require(self.prune is None or (is_number(self.prune) and self.prune >= 0),
                f"prune: must be None or a number >= 0, got {self.prune!r}")
        require(self.keep is None or (is_int(self.keep) and self.keep >= 1),
                f"keep: must be None or an integer >= 1, got {self.keep!r}")
        for name, allowed in (("bypass_rule", BYPASS_RULES), ("dedupe", DEDUPE),
                              ("draw", DRAWS)):
            require(getattr(self, name) in allowed, f"{name}: expected one of "
                    f"{', '.join(allowed)}, got {getattr(self, name)!r}")
        self._batch_size, self._counts = 0, None

    # ------------------------------------------------------------------ statistics

    def begin(self, batch_size: int, seq_len: int) -> None:
        self._batch_size, self._counts = batch_size, None

    def stats(self) -> dict[str, torch.Tensor]:
        """Per row (B,): ``bypassed``, steps the bypass decided; ``candidates``, distinct
        candidate actions scored (none on a bypassed step); ``lookahead``, sequences the
        sampler's batched calls evaluated (the winner's included: the loop reuses it)."""
        counts = self._counts
        if counts is None:
            counts = torch.zeros(3, self._batch_size, dtype=torch.long)
        return dict(zip(("bypassed", "candidates", "lookahead"), counts, strict=True))

    def _count(self, state: StepState, step: LookaheadStep) -> None:
        if self._counts is None:
            self._counts = torch.zeros(3, self._batch_size, dtype=torch.long,
                                       device=state.tokens.device)
        scored = step.candidates.valid.sum(1).masked_fill(step.bypass, 0)
        per_row = torch.stack([step.bypass.long(), scored, step.evaluated.sum(1)])
        self._counts.index_add_(1, state.row_ids, per_row)

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
        # a duplicate: an earlier candidate leads to the same next state (or reveals the same
        # positions)
        key = nxt if self.dedupe == "state" else reveal
        same = (key[:, :, None, :] == key[:, None, :, :]).all(-1)  # (B, C, C)
        earlier = torch.ones(c, c, dtype=torch.bool, device=same.device).tril(-1)
        valid = ~(same & earlier).any(-1)
        cost = torch.where(reveal, state.entropy.double()[:, None, :], 0.0).sum(-1)
        return Candidates(reveal=reveal, tokens=nxt, valid=valid, cost=cost)

    def _draw_tokens(self, state: StepState, tau: float, m: int) -> torch.Tensor:
        """(B, m, N) tokens drawn from p^(1/tau): by inverse CDF on per-row uniforms, or
        (``draw='gumbel'``) as argmax(log p / tau + G), G the j-th (N, V) slice of the
        step's stream-1 Gumbel draw of shape (m, N, V)."""
        if self.draw == "gumbel":
            n, v = state.log_probs.shape[1:]
            scaled = state.log_probs.double() / tau
            return torch.stack([(scaled + row_gumbel(state.seeds, state.global_step, 1, (n, v),
                                                    start=j * n * v)).argmax(-1)
                                for j in range(m)], 1)  # one (B, N, V) draw at a time
        cdf = torch.softmax(state.log_probs.double() / tau, dim=-1).cumsum(-1)  # (B, N, V)
        # u in (0, 1) scaled by the total: the first index whose cdf reaches it has p > 0
        u = state.uniform(1, (state.tokens.shape[1], m)) * cdf[..., -1:]  # (B, N, m)
        return torch.searchsorted(cdf, u).clamp(max=cdf.shape[-1] - 1).transpose(1, 2)

    def _apply_bypass(self, state: StepState, cands: Candidates) -> torch.Tensor:
        """Rows that clear ``bypass`` (by ``bypass_rule``) reveal their sure positions as
        c = 0, the only candidate left."""
        b = state.tokens.shape[0]
        if self.bypass is None:
            return torch.zeros(b, dtype=torch.bool, device=state.tokens.device)
        if self.bypass_rule == "block":
            top = state.widen(state.probs.amax(-1))  # (B, N) max-probability
            rows = ((top >= self.bypass) | ~state.eligible).all(1) & state.eligible.any(1)
            sure = state.eligible & rows[:, None]
        else:
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
                             objective=objective, winner=winner, next_output=next_output,
                             evaluated=need)

    def select(self, state: StepState) -> Selection:
        step = self.score(state)
        self._count(state, step)
        idx = step.winner[:, None, None].expand(-1, 1, state.tokens.shape[1])
        reveal = step.candidates.reveal.gather(1, idx).squeeze(1)
        tokens = step.candidates.tokens.gather(1, idx).squeeze(1)
        return Selection(reveal, tokens, next_output=step.next_output)
