"""KLASS: reveal positions whose prediction has stopped moving (KL-stable) and is confident."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from unmask.errors import require
from unmask.samplers.base import CountRule, Sampler, Selection, StepState, register, top_k_mask
from unmask.validation import is_int


@register("klass")
@dataclass
class KLASSSampler(CountRule, Sampler):
    """KL_t(i) = KL(p_t(i) || p_{t-1}(i)) in nats, per position of each row.

    Reveal every eligible position whose KL has been below ``kl_threshold`` for the last
    ``history`` passes and whose confidence exceeds ``conf_threshold``; a row with none
    falls back to the top-k confidence positions (k, steps, schedule: :class:`CountRule`).
    A position needs ``history`` steps of KL before it can count as stable, so the first
    ``history`` steps are always top-k.
    """

    kl_threshold: float = 0.01
    conf_threshold: float = 0.9
    history: int = 2

    def __post_init__(self):
        super().__post_init__()
        require(self.kl_threshold >= 0, f"kl_threshold: must be >= 0, got {self.kl_threshold}")
        require(0.0 <= self.conf_threshold <= 1.0,
                f"conf_threshold: must be in [0, 1], got {self.conf_threshold}")
        require(is_int(self.history) and self.history >= 1,
                f"history: must be an integer >= 1, got {self.history}")

    def begin(self, batch_size: int, seq_len: int) -> None:
        # per-decode state, indexed by each row's position in the caller's batch, since rows
        # leave the working batch as they finish; the vocabulary size is known at the 1st step
        self._batch_size = batch_size
        self._prev: torch.Tensor | None = None  # (B_total, N, V) previous log-probabilities
        #: (B_total, N) the passes in a row, up to the last, whose KL was below the threshold
        #: (a position is stable once ``history`` of them were)
        self._run: torch.Tensor | None = None

    def select(self, state: StepState) -> Selection:
        rows, lp = state.row_ids, state.log_probs  # lp: (B, N, V), in the model's precision
        # rows: increasing indices into the decode's batch (the loop's; rows only ever leave)
        if self._prev is None:
            b, n, v = self._batch_size, lp.shape[1], lp.shape[2]
            self._prev = torch.full((b, n, v), -torch.inf, dtype=lp.dtype, device=lp.device)
            self._run = torch.zeros((b, n), dtype=torch.long, device=lp.device)
            self._owned = True
        # every row of the decode, in order (rows only ever leave): no gather, no copy back
        every = len(rows) == self._batch_size
        # KL = sum_v p (log p - log p_prev) over p > 0: where p = 0 the term is 0 * (-inf)
        # or 0 * nan, a NaN that nansum leaves out (p > 0 never gives one). A token that
        # gained mass from zero makes KL infinite: not stable (so is a row's first step,
        # against the -inf it starts from)
        prev = self._prev if every else self._prev[rows]
        kl = torch.nansum(state.probs * (lp - prev), -1)  # (B, N) nats
        run = torch.where(kl < self.kl_threshold, (self._run if every else self._run[rows]) + 1,
                          0)
        if every:  # the pass's own tensors are kept, not copied (nothing writes into them)
            self._run, self._prev, self._owned = run, lp, False
        else:
            if not self._owned:  # a pass's tensors, kept: written into only as a copy
                self._run, self._prev, self._owned = self._run.clone(), self._prev.clone(), True
            self._run[rows], self._prev[rows] = run, lp
        reveal = (run >= self.history) & (state.x0_prob > self.conf_threshold) & state.eligible
        # rows with nothing stable take the top-k (computed for every row: no host read)
        fallback = top_k_mask(state.x0_prob, state.eligible, self.count(state))
        return Selection(torch.where(reveal.any(1, keepdim=True), reveal, fallback))
