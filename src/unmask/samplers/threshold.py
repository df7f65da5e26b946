"""Fast-dLLM threshold: reveal every position whose confidence clears tau."""

from dataclasses import dataclass
from typing import ClassVar

from unmask.errors import require
from unmask.samplers.base import Sampler, Selection, StepState, at_least_one, register


@register("threshold")
@dataclass
class ThresholdSampler(Sampler):
    """Reveal all eligible positions with p_i(x0_i) >= tau; at least the most confident one."""

    reads_eligible_only: ClassVar[bool] = True

    tau: float = 0.9

    def __post_init__(self):
        require(0.0 <= self.tau <= 1.0, f"tau: must be in [0, 1], got {self.tau}")

    def select(self, state: StepState) -> Selection:
        reveal = (state.x0_prob >= self.tau) & state.eligible
        return Selection(at_least_one(reveal, state.x0_prob, state.eligible))
