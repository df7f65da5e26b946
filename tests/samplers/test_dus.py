"""DUS (arXiv 2506.19037): the dilation groups, exact reveal sets on hand-built states, and
the passes of a decode on the exact toy."""

import math

import pytest
import torch
from stepstate import hand_state

from unmask import DecodeConfig, ExactJointMDM, UnmaskError, decode, make_sampler
from unmask.samplers.dus import dilation_groups


@pytest.mark.parametrize("length,base,groups", [
    (8, 2, [[0, 4], [2, 6], [1, 3, 5, 7]]),
    (9, 2, [[0, 4, 8], [2, 6], [1, 3, 5, 7]]),
    (10, 2, [[0, 5], [2, 4, 6, 8], [1, 3, 7, 9]]),
    (6, 2, [[0, 3], [1, 2, 4, 5]]),  # the last group (stride 1) takes what is left
    (5, 2, [[0, 1, 2, 3, 4]]),  # a last group smaller than the one before joins it
    (27, 3, [[0, 9, 18], [3, 6, 12, 15, 21, 24],
             [o for o in range(27) if o % 3]]),
    (1, 2, [[0]]),
])
def test_groups(length, base, groups):
    assert dilation_groups(length, base) == groups


@pytest.mark.parametrize("base", [2, 3])
def test_groups_partition_the_block_in_log_many_passes(base):
    for length in range(1, 130):
        groups = dilation_groups(length, base)
        flat = sorted(o for g in groups for o in g)
        assert flat == list(range(length))
        assert len(groups) <= math.floor(math.log(length, base) + 1e-9) + 1
        # every group before the last holds positions spaced by at least two
        for g in groups[:-1]:
            assert all(b - a >= 2 for a, b in zip(g, g[1:], strict=False))


def test_select_reveals_the_first_group_with_an_eligible_position():
    s = make_sampler("dus")
    conf = torch.rand(3, 8, generator=torch.Generator().manual_seed(0))
    eligible = torch.ones(3, 8, dtype=torch.bool)
    eligible[1, [0, 4]] = False  # group 0 already revealed: group 1 next
    eligible[2, [0, 2, 6]] = False  # position 4 left of group 0 (given positions drop out)
    reveal = s.select(hand_state(conf, eligible)).reveal
    assert reveal[0].nonzero().flatten().tolist() == [0, 4]
    assert reveal[1].nonzero().flatten().tolist() == [2, 6]
    assert reveal[2].nonzero().flatten().tolist() == [4]


def test_select_ignores_confidence():
    s = make_sampler("dus")
    a = s.select(hand_state(torch.linspace(0, 1, 8)[None])).reveal
    b = s.select(hand_state(torch.linspace(1, 0, 8)[None])).reveal
    assert torch.equal(a, b)


def test_decode_passes_follow_the_groups():
    m = ExactJointMDM(n=8, v=2, seed=2, concentration=0.5)
    x = torch.full((3, 8), m.mask_id)
    x[1, [0, 4]] = m.conditionals(x[1:2])[0, [0, 4]].argmax(-1)  # both of group 0 given
    x[2, 2] = 1
    res = decode(m, x, make_sampler("dus"))
    group = torch.tensor([0, 2, 1, 2, 0, 2, 1, 2])
    assert res.reveal_step[0].tolist() == group.tolist()
    assert res.reveal_step[1].tolist() == [-1, 1, 0, 1, -1, 1, 0, 1]  # group 0 costs no pass
    assert res.reveal_step[2].tolist() == [0, 2, -1, 2, 0, 2, 1, 2]
    assert res.nfe.tolist() == [3, 2, 3]


def test_block_lays_the_groups_on_each_block():
    m = ExactJointMDM(n=8, v=2, seed=2, concentration=0.5)
    x = torch.full((1, 8), m.mask_id)
    res = decode(m, x, make_sampler("dus", block=4), DecodeConfig(block_size=4))
    assert res.reveal_step[0].tolist() == [0, 1, 0, 1, 2, 3, 2, 3]
    # the whole sequence as one window, but the loop's blocks: groups each block holds
    whole = decode(m, x, make_sampler("dus"), DecodeConfig(block_size=4))
    assert whole.reveal_step[0].tolist() == [0, 2, 1, 2, 3, 5, 4, 5]


@pytest.mark.parametrize("bad", [{"base": 1}, {"base": 2.0}, {"block": 0}, {"skip_exp": 0}])
def test_bad_parameters(bad):
    with pytest.raises(UnmaskError, match=next(iter(bad))):
        make_sampler("dus", **bad)
