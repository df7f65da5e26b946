"""Entropy: reveal the k positions of lowest predictive entropy."""

from dataclasses import dataclass

from unmask.samplers.base import CountRule, Sampler, Selection, StepState, register, top_k_mask


@register("entropy")
@dataclass
class EntropySampler(CountRule, Sampler):
    """Top-k of -H_i (nats)."""

    def select(self, state: StepState) -> Selection:
        return Selection(top_k_mask(-state.entropy, state.eligible, self.count(state)))
