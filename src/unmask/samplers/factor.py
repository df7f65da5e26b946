"""Fast-dLLM's factor rule (Wu et al., arXiv 2505.22618): how many of the most confident
positions to reveal together, from a bound on the error of decoding them in parallel.

The paper's theorem on parallel decoding: when every one of n positions has confidence
above 1 - eps and (n + 1) * eps <= 1, greedy decoding of the n at once equals greedy decoding
of them in sequence. Its factor rule relaxes this with a factor f: reveal the top n while
(n + 1) * (1 - c_(n)) < f, c_(n) being the n-th largest confidence (f = 1 is the theorem's
condition; larger f is more aggressive). Read per rank, the r-th most confident position
(1-based) is revealed when

    c_(r) >= 1 - f / (r + 1),

the threshold form of the authors' release (which reveals a rank that equals the threshold).
The confidences fall and the thresholds rise with r, so the ranks that pass are a prefix; the
most confident position is always revealed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch

from unmask.errors import require
from unmask.samplers.base import Sampler, Selection, StepState, register


def factor_reveal(confidence: torch.Tensor, eligible: torch.Tensor, f: float) -> torch.Tensor:
    """(B, N) bool: the positions the factor rule reveals, given confidences (B, N) and the
    eligible positions (B, N) bool; at least the most confident eligible one per row that has
    one. Ties go to the lower position index."""
    scores = confidence.double().masked_fill(~eligible, -torch.inf)
    order = torch.argsort(scores, dim=1, descending=True, stable=True)
    c = scores.gather(1, order)
    rank = torch.arange(1, c.shape[1] + 1, device=c.device, dtype=torch.float64)
    passes = c >= 1.0 - f / (rank + 1.0)
    passes[:, 0] = True  # always progress
    take = passes.long().cumprod(1).bool() & eligible.gather(1, order)
    reveal = torch.zeros_like(eligible)
    reveal.scatter_(1, order, take)
    return reveal


@register("factor")
@dataclass
class FactorSampler(Sampler):
    """Reveal the most confident positions whose rank r (1-based) has p(x0) >= 1 - f/(r+1)
    (arXiv 2505.22618, the factor rule); at least one.

    f: the factor, > 0 (f = 1 is the theorem's condition; larger reveals more per pass).
    """

    reads_eligible_only: ClassVar[bool] = True

    f: float = 1.0

    def __post_init__(self):
        require(isinstance(self.f, (int, float)) and self.f > 0,
                f"f: must be a number > 0, got {self.f!r}")

    def select(self, state: StepState) -> Selection:
        return Selection(factor_reveal(state.x0_prob, state.eligible, float(self.f)))
