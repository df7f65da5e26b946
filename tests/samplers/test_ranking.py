"""The ranking helpers rank scores in their own dtype: the same choice, ties included, as
ranking them widened to float64 (what they did before), for every floating dtype and for
integer scores."""

import math

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from unmask.samplers.base import at_least_one, best_position, budget_prefix, top_k_mask
from unmask.samplers.ramp import entropy_prefix


def _wide_top_k(scores, eligible, k):
    order = torch.argsort(torch.where(eligible, scores.double(), -math.inf), dim=1,
                          descending=True, stable=True)
    ranks = torch.empty_like(order)
    ranks.scatter_(1, order, torch.arange(order.shape[1]).expand_as(order))
    return (ranks < k[:, None]) & eligible


def _wide_prefix(cost, scores, eligible, budget):
    order = torch.argsort(scores.double().masked_fill(~eligible, -torch.inf), dim=1,
                          descending=True, stable=True)
    c = torch.where(eligible, cost.double(), 0.0).gather(1, order)
    charged = c.cumsum(1) - c.cummax(1).values
    out = torch.zeros_like(eligible)
    out.scatter_(1, order, charged <= budget + 1e-12)
    return out & eligible


DTYPES = [torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.int64]


@settings(max_examples=60, deadline=None)
@given(b=st.integers(1, 4), n=st.integers(1, 12), levels=st.integers(1, 5),
       dtype=st.sampled_from(DTYPES), seed=st.integers(0, 2**31 - 1))
def test_ranking_in_the_scores_dtype_equals_ranking_them_in_float64(b, n, levels, dtype, seed):
    g = torch.Generator().manual_seed(seed)
    # few distinct levels: many ties, which the stable order gives to the lower position;
    # offsets of 2**-14 that float32 keeps and a narrower type (half, bfloat16) merges
    raw = (torch.randint(0, levels, (b, n), generator=g).double()
           + torch.randint(0, 2, (b, n), generator=g).double() * 2**-14)
    scores = raw.to(dtype) if dtype != torch.int64 else torch.randint(0, levels, (b, n),
                                                                      generator=g)
    eligible = torch.rand(b, n, generator=g) < 0.7
    k = torch.randint(1, n + 1, (b,), generator=g)
    cost = torch.rand(b, n, generator=g)
    assert torch.equal(top_k_mask(scores, eligible, k), _wide_top_k(scores, eligible, k))
    assert torch.equal(best_position(scores, eligible),
                       _wide_top_k(scores, eligible, torch.ones(b, dtype=torch.long)))
    nothing = torch.zeros_like(eligible)
    assert torch.equal(at_least_one(nothing, scores, eligible), best_position(scores, eligible))
    for gamma in (0.0, 0.3, 1.5):
        assert torch.equal(budget_prefix(cost, scores, eligible, gamma, uncharged_max=True),
                           _wide_prefix(cost, scores, eligible, gamma))
        assert torch.equal(entropy_prefix(cost, scores, eligible, torch.full((b,), gamma)),
                           _wide_prefix(cost, scores, eligible, gamma))
