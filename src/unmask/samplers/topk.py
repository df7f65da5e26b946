"""Naive parallel decoding: a fixed k most-confident positions per step."""

from dataclasses import dataclass
from typing import ClassVar

from unmask.errors import require
from unmask.samplers.base import CountRule, Sampler, Selection, StepState, register, top_k_mask


@register("topk")
@dataclass
class TopKSampler(CountRule, Sampler):
    """Top-k confidence with a fixed k per step (the "naive parallel" baseline).

    It is also Mask-Predict's equivalent under absorbing-state decoding: Mask-Predict keeps the
    most confident predictions and re-masks the rest, and since this loop never revisits a
    revealed token, keeping the top N(T-t)/T and re-masking the others is this rule with a
    linear schedule (``steps=T``).
    """

    reads_eligible_only: ClassVar[bool] = True

    k: int = 2

    def __post_init__(self):
        super().__post_init__()
        require(self.steps is None, "steps: topk uses a fixed k; use 'confidence' with steps=T")

    def select(self, state: StepState) -> Selection:
        return Selection(top_k_mask(state.x0_prob, state.eligible, self.count(state)))
