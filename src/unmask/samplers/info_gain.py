"""Info-Gain: commit the candidate action with the largest information gain net of its cost."""

from dataclasses import dataclass
from typing import ClassVar

from unmask.samplers.base import register
from unmask.samplers.lookahead import LookaheadSampler


@register("info-gain")
@dataclass
class InfoGainSampler(LookaheadSampler):
    """J(a) = [Hbar(z) - Hbar(apply(z, a))] - sum_{l in a} H_l(z), maximised over candidates
    evaluated in one batched call (parameters: :class:`LookaheadSampler`)."""

    cost_weight: ClassVar[float] = 1.0
