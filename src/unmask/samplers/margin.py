"""Margin: reveal the k positions with the largest gap between the two most probable tokens."""

from dataclasses import dataclass
from typing import ClassVar

from unmask.samplers.base import CountRule, Sampler, Selection, StepState, register, top_k_mask


@register("margin")
@dataclass
class MarginSampler(CountRule, Sampler):
    """Top-k of p_i(top1) - p_i(top2)."""

    reads_eligible_only: ClassVar[bool] = True

    def select(self, state: StepState) -> Selection:
        top2 = state.top2  # (B, W, 2), shared with whatever else reads it this pass
        return Selection(top_k_mask(state.widen(top2[..., 0] - top2[..., 1]), state.eligible,
                                    self.count(state)))
