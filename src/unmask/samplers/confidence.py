"""Confidence: reveal the k positions whose proposed token is most probable."""

from dataclasses import dataclass
from typing import ClassVar

from unmask.samplers.base import CountRule, Sampler, Selection, StepState, register, top_k_mask


@register("confidence")
@dataclass
class ConfidenceSampler(CountRule, Sampler):
    """Top-k of p_i(x0_i) (the max-probability at temperature 0). k=1 is sequential."""

    reads_eligible_only: ClassVar[bool] = True

    def select(self, state: StepState) -> Selection:
        return Selection(top_k_mask(state.x0_prob, state.eligible, self.count(state)))
