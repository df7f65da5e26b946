"""EB-Sampler: reveal the largest prefix whose entropy, beyond its most uncertain member,
stays within a budget."""

from dataclasses import dataclass
from typing import ClassVar

from unmask.errors import require
from unmask.samplers.base import Sampler, Selection, StepState, budget_prefix, register
from unmask.samplers.scan import check_scan_order, scan_order_scores


@register("eb")
@dataclass
class EBSampler(Sampler):
    """Sort eligible positions (by ascending entropy, or by descending confidence with
    ``order='confidence'``) and take the largest prefix U with sum_U H - max_U H <= gamma.

    The bound is an upper bound on the joint dependence error of revealing U at once: the
    summed entropy beyond the one position that would be revealed anyway. The prefix's
    sum - max never decreases as the prefix grows, so the prefix is a count. At least 1.
    """

    reads_eligible_only: ClassVar[bool] = True

    gamma: float = 0.1
    order: str = "entropy"

    def __post_init__(self):
        require(self.gamma >= 0, f"gamma: must be >= 0, got {self.gamma}")
        check_scan_order(self.order)

    def select(self, state: StepState) -> Selection:
        # the first position is always in the prefix (sum - max = 0): always progress
        return Selection(budget_prefix(state.entropy, scan_order_scores(state, self.order),
                                       state.eligible, self.gamma, uncharged_max=True))
