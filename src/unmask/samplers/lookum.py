"""LookUM: commit the candidate action that leaves the least mean uncertainty."""

from dataclasses import dataclass
from typing import ClassVar

from unmask.samplers.base import register
from unmask.samplers.lookahead import LookaheadSampler


@register("lookum")
@dataclass
class LookUMSampler(LookaheadSampler):
    """J(a) = -Hbar(apply(z, a)) (Info-Gain without the cost term; parameters:
    :class:`LookaheadSampler`).

    Revealing an uncertain position removes it from the mean, and a model tends to grow
    confident after any commitment, so this objective can favour risky actions.
    """

    cost_weight: ClassVar[float] = 0.0
