"""Uniform: reveal k masked positions chosen uniformly at random (the MDM's own order)."""

from dataclasses import dataclass
from typing import ClassVar

from unmask.samplers.base import CountRule, Sampler, Selection, StepState, register, top_k_mask


@register("uniform")
@dataclass
class UniformSampler(CountRule, Sampler):
    """k random eligible positions per step, reproducible per row seed."""

    reads_eligible_only: ClassVar[bool] = True

    def select(self, state: StepState) -> Selection:
        scores = state.uniform(1, (state.tokens.shape[1],))
        return Selection(top_k_mask(scores, state.eligible, self.count(state)))
