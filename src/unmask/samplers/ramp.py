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
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from unmask.errors import require
from unmask.samplers.base import (
    Selection,
    StepState,
    check_scan_order,
    scan_order_scores,
    top_k_mask,
)
from unmask.samplers.spec import register_wrapper
from unmask.samplers.wrapper import SamplerWrapper
from unmask.validation import is_int


def ramp_cap(known: torch.Tensor, rate: float, least: int) -> torch.Tensor:
    """(B,) long: positions a row may reveal this pass, ``max(least, floor(rate * known))``
    for ``known`` (B,) real tokens the row holds."""
    return torch.floor(known.double() * rate + 1e-9).long().clamp(min=least)


@register_wrapper("ramp", primary="rate")
@dataclass
class Ramp(SamplerWrapper):
    """``inner``'s selection, cut to its best ``max(min, floor(rate * known))`` positions in
    ``order`` (``known``: real tokens in the row).

    rate: cap growth per known token (> 0); min: the cap with nothing known (>= 1);
    order: 'confidence' (descending proposal probability) or 'entropy' (ascending), the order
    in which the cut keeps positions. The inner sampler's tokens and entropies are kept; an
    inner sampler that evaluates its own next state cannot be cut (that state would be wrong).
    """

    rate: float = 0.25
    min: int = 1
    order: str = "confidence"

    def __post_init__(self):
        super().__post_init__()
        require(not isinstance(self.rate, bool) and isinstance(self.rate, (int, float))
                and math.isfinite(self.rate) and self.rate > 0,
                f"ramp: rate must be a number > 0, got {self.rate!r}")
        require(is_int(self.min) and self.min >= 1,
                f"ramp: min must be an integer >= 1, got {self.min!r}")
        check_scan_order(self.order)
        require(not self.inner.evaluates_next_state,
                f"ramp: {self.inner.label} evaluates its next state itself; it cannot be capped")

    @property
    def label(self) -> str:
        return f"{self.inner.label}+ramp={self.rate:g}"

    def select(self, state: StepState) -> Selection:
        chosen = self.inner.select(state)
        known = state.real_mask[state.tokens].sum(1)  # (B,)
        cap = ramp_cap(known, self.rate, self.min)
        scores = scan_order_scores(state, self.order)
        keep = top_k_mask(scores, chosen.reveal, cap)
        return Selection(keep, tokens=chosen.tokens, entropy=chosen.entropy)


__all__ = ["Ramp", "ramp_cap"]
