"""Entropy: reveal the k positions of lowest predictive entropy."""

from dataclasses import dataclass
from typing import ClassVar

from unmask.samplers.base import CountRule, Sampler, Selection, StepState, register, top_k_mask


@register("entropy")
@dataclass
class EntropySampler(CountRule, Sampler):
    """Top-k of -H_i (nats)."""

    reads_eligible_only: ClassVar[bool] = True

    def select(self, state: StepState) -> Selection:
        return Selection(top_k_mask(-state.entropy, state.eligible, self.count(state)))
