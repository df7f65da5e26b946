"""DEMASK's selection rule (arXiv 2604.02560) on this project's MI estimator.

DEMASK trains a light head that predicts the pairwise dependence of masked positions from the
model's hidden states, and reveals per pass a set built greedily under a bound on that
dependence. Here the dependence predictor is the neural MI estimator
(:class:`~unmask.mi.estimator.MIEstimator`, the same one ``mi-guided`` reads): I_ij in nats,
from the hidden states of the same forward pass, no extra model call.

The rule: visit the eligible positions in descending confidence p_i(x0_i); take position i when
its estimated dependence with the positions already taken stays within ``bound``:

    aggregate='max':  max_{j taken} I_ij <= bound   (every pair under the bound)
    aggregate='sum':  sum_{j taken} I_ij <= bound   (the dependence i adds to the set)

The most confident position is always taken. Unlike ``mi-guided`` nothing is charged for a
position's own entropy: the bound is on dependence alone, the order carries the confidence.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from unmask.errors import require
from unmask.samplers.base import Sampler, Selection, StepState, register
from unmask.samplers.mi_guided import MIGuidedSampler
from unmask.samplers.scan import greedy_scan

AGGREGATES = ("max", "sum")


def dependence_bounded_set(mi: torch.Tensor, scores: torch.Tensor, eligible: torch.Tensor,
                           bound: float, aggregate: str = "max") -> torch.Tensor:
    """(B, N) bool: the greedy set, in descending ``scores`` (B, N), of eligible positions
    (B, N) whose dependence ``mi`` (B, N, N) with the positions taken before stays within
    ``bound`` ('max' over them or their 'sum'). The first eligible position is always taken."""
    # taking i charges every j its I_ji: the transpose (a view; the scan gathers its rows)
    return greedy_scan(scores, eligible, mi.transpose(1, 2), bound + 1e-12, aggregate)


@register("demask")
@dataclass
class DEMASKSampler(Sampler):
    """Greedy in confidence order under a bound on estimated pairwise dependence
    (arXiv 2604.02560's rule, the MI estimator as its dependence head).

    bound: the largest dependence (nats) a position may have with the set ('max': with each
        member; 'sum': with all of them together). 0 reveals only mutually independent
        positions by the estimator's account.
    aggregate: 'max' or 'sum'.
    estimator: an :class:`~unmask.mi.estimator.MIEstimator`, a folder holding one, or None for
        the estimator shipped with the model's task (as ``mi-guided``).
    """

    bound: float = 0.05
    aggregate: str = "max"
    estimator: object = field(default=None, repr=False)

    def __post_init__(self):
        require(isinstance(self.bound, (int, float)) and self.bound >= 0,
                f"bound: must be a number >= 0, got {self.bound!r}")
        require(self.aggregate in AGGREGATES,
                f"aggregate: expected one of {AGGREGATES}, got {self.aggregate!r}")
        # the estimator is loaded, checked against the model and run as mi-guided does
        self._mi = MIGuidedSampler(estimator=self.estimator)

    @property
    def needs_hidden_layers(self) -> bool:
        return self._mi.needs_hidden_layers

    def prepare(self, model) -> None:
        self._mi.prepare(model)

    def begin(self, batch_size: int, seq_len: int) -> None:
        self._mi.begin(batch_size, seq_len)

    def select(self, state: StepState) -> Selection:
        mi = self._mi.mutual_information(state)
        return Selection(dependence_bounded_set(mi, state.x0_prob, state.eligible,
                                                float(self.bound), self.aggregate))
