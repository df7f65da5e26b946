"""``+ramp``: a per-pass reveal cap that grows with what a row already holds.

A sequence's first residues can fix a global latent (an antibody's chain type, a sentence's
topic) that every other position depends on. Before it is fixed, each position's marginal is a
mixture over the latent's values, and positions revealed together in one pass are drawn from
independent mixtures: a chimera (a light-chain start, a heavy-chain tail). Pairwise MI between
masked positions is small there (each pair is only weakly informative of the latent), so
budgeted rules let many through at once. Once a few positions are known, the latent is
resolved and the rest are close to independent given them.

:class:`Ramp` lets the inner sampler choose as usual, then keeps at most

    cap = max(min, floor(rate * known))

of its positions (the best in scan order), where ``known`` is how many real tokens the row
holds (given context included): decoding from nothing goes one position per pass, then the cap
grows geometrically with the revealed context (about (1 + rate) per pass); a template with much
context (infilling) is not slowed at all.

With ``budget='entropy'`` the cap is in nats instead, EB-Sampler's bound with a budget that
grows with the context: the longest prefix of the inner sampler's positions (in scan order)
with sum H - max H <= rate * known. From nothing it is one position a pass (the first is
uncharged); later, confident positions go many at a time and uncertain ones few.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from unmask.errors import require
from unmask.samplers.base import Selection, StepState, orderable, top_k_mask
from unmask.samplers.scan import check_scan_order, scan_order_scores
from unmask.samplers.spec import register_wrapper
from unmask.samplers.wrapper import SamplerWrapper
from unmask.validation import is_int

BUDGETS = ("count", "entropy")


def ramp_cap(known: torch.Tensor, rate: float, least: int) -> torch.Tensor:
    """(B,) long: positions a row may reveal this pass, ``max(least, floor(rate * known))``
    for ``known`` (B,) real tokens the row holds (held at 2**53, so that a huge rate caps
    nothing rather than overflowing)."""
    cap = torch.floor(known.double() * rate + 1e-9).clamp(max=float(2**53))
    return cap.long().clamp(min=min(least, 2**53))


def entropy_prefix(entropy: torch.Tensor, scores: torch.Tensor, chosen: torch.Tensor,
                   budget: torch.Tensor) -> torch.Tensor:
    """(B, N) bool: each row's longest prefix of ``chosen`` (B, N) positions, visited in
    descending ``scores``, whose ``entropy`` (B, N) sum less its maximum is <= ``budget``
    (B,) nats (the first always fits)."""
    order = torch.argsort(orderable(scores).masked_fill(~chosen, -torch.inf), dim=1,
                          descending=True, stable=True)
    c = torch.where(chosen, entropy.double(), 0.0).gather(1, order)
    charged = c.cumsum(1) - c.cummax(1).values
    prefix = torch.zeros_like(chosen)
    prefix.scatter_(1, order, charged <= budget.double()[:, None] + 1e-12)
    return prefix & chosen


@register_wrapper("ramp", primary="rate")
@dataclass
class Ramp(SamplerWrapper):
    """``inner``'s selection, cut to its best ``max(min, floor(rate * known))`` positions in
    ``order`` (``known``: real tokens in the row).

    rate: cap growth per known token (> 0; nats per known token with ``budget='entropy'``);
    min: the cap with nothing known (>= 1; count budget only); order: 'confidence'
    (descending proposal probability) or 'entropy' (ascending), the order in which the cut
    keeps positions; budget: 'count' (positions) or 'entropy' (nats, EB's bound). The inner
    sampler's tokens and entropies are kept; an inner sampler that evaluates its own next
    state cannot be cut (that state would be wrong).
    """

    rate: float = 0.25
    min: int = 1
    order: str = "confidence"
    budget: str = "count"

    def __post_init__(self):
        super().__post_init__()
        require(not isinstance(self.rate, bool) and isinstance(self.rate, (int, float))
                and math.isfinite(self.rate) and self.rate > 0,
                f"ramp: rate must be a number > 0, got {self.rate!r}")
        require(is_int(self.min) and self.min >= 1,
                f"ramp: min must be an integer >= 1, got {self.min!r}")
        check_scan_order(self.order)
        require(self.budget in BUDGETS,
                f"ramp: budget must be one of {', '.join(BUDGETS)}, got {self.budget!r}")
        require(not self.inner.evaluates_next_state,
                f"ramp: {self.inner.label} evaluates its next state itself; it cannot be capped")

    @property
    def label(self) -> str:
        extra = "" if self.budget == "count" else f",budget={self.budget}"
        return f"{self.inner.label}+ramp={self.rate:g}{extra}"

    def select(self, state: StepState) -> Selection:
        chosen = self.inner.select(state)
        known = state.real_mask[state.tokens].sum(1)  # (B,)
        scores = scan_order_scores(state, self.order)
        if self.budget == "entropy":
            entropy = state.entropy if chosen.entropy is None else chosen.entropy
            keep = entropy_prefix(entropy, scores, chosen.reveal, known.double() * self.rate)
        else:
            keep = top_k_mask(scores, chosen.reveal, ramp_cap(known, self.rate, self.min))
        return Selection(keep, tokens=chosen.tokens, entropy=chosen.entropy)


__all__ = ["BUDGETS", "Ramp", "entropy_prefix", "ramp_cap"]
