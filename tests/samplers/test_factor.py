"""Fast-dLLM's factor rule (arXiv 2505.22618): exact reveal sets on hand-built states, and
its limits against sequential and one-pass decoding."""

import pytest
import torch
from stepstate import hand_state

from unmask import DecodeConfig, UnmaskError, decode, make_sampler


def revealed(f, conf, eligible=None):
    reveal = make_sampler("factor", f=f).select(hand_state([conf], eligible)).reveal
    return reveal[0].nonzero().flatten().tolist()


# confidences by position; ranked: 0.99 (pos 0), 0.95 (3), 0.9 (1), 0.7 (2), 0.2 (4)
CONF = [0.99, 0.9, 0.7, 0.95, 0.2]


@pytest.mark.parametrize("f,expected", [
    (1.0, [0, 1, 3]),  # r=2: 0.95 >= 2/3; r=3: 0.9 >= 3/4; r=4: 0.7 < 4/5
    (0.2, [0, 3]),  # r=2: 0.95 >= 1 - 0.2/3; r=3: 0.9 < 0.95
    (2.0, [0, 1, 2, 3]),  # r=4: 0.7 >= 0.6; r=5: 0.2 < 2/3
    (6.0, [0, 1, 2, 3, 4]),  # every threshold <= 0
])
def test_ranks_pass_their_thresholds(f, expected):
    assert revealed(f, CONF) == expected


def test_a_confidence_on_its_threshold_is_revealed():
    # f = 1: rank 3 needs 1 - 1/4 = 0.75, met exactly
    assert revealed(1.0, [1.0, 0.75, 0.75]) == [0, 1, 2]
    assert revealed(1.0, [1.0, 0.75, 0.75 - 1e-12]) == [0, 1]


def test_the_ranks_revealed_are_a_prefix():
    # rank 3 fails (0.5 < 0.75), so rank 4 (0.5 < 0.8) cannot pass either; only a prefix
    assert revealed(1.0, [0.99, 0.9, 0.5, 0.5]) == [0, 1]


def test_always_the_most_confident():
    assert revealed(1.0, [0.1, 0.3, 0.05]) == [1]


def test_only_eligible_positions_and_their_ranks():
    # position 0 is not eligible: 0.95 is rank 1, 0.9 rank 2 (>= 2/3), 0.7 rank 3 (< 3/4)
    assert revealed(1.0, CONF, [[False, True, True, True, True]]) == [1, 3]


def test_tiny_factor_is_sequential_confidence_decoding(tiny_transformer):
    m = tiny_transformer
    x = torch.full((4, 12), m.mask_id)
    x[1, ::3] = 2
    for temperature in (0.0, 1.0):
        cfg = DecodeConfig(temperature=temperature)
        seq = decode(m, x, "confidence", cfg, seed=5)
        tiny = decode(m, x, make_sampler("factor", f=1e-9), cfg, seed=5)
        assert torch.equal(tiny.tokens, seq.tokens)
        assert torch.equal(tiny.reveal_step, seq.reveal_step)


def test_large_factor_is_one_pass(tiny_transformer):
    m = tiny_transformer
    x = torch.full((2, 12), m.mask_id)
    res = decode(m, x, make_sampler("factor", f=13.0))
    assert res.nfe.tolist() == [1, 1]


@pytest.mark.parametrize("bad", [0.0, -1.0, "x"])
def test_bad_factor(bad):
    with pytest.raises(UnmaskError, match="f:"):
        make_sampler("factor", f=bad)
