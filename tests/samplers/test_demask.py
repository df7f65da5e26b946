"""DEMASK's rule (arXiv 2604.02560) on MI: exact greedy sets on hand-built dependence, and
on the exact toy with its analytic MI as the dependence head."""

import pytest
import torch
from stepstate import hand_state

from unmask import DecodeConfig, ExactJointMDM, UnmaskError, decode, make_sampler
from unmask.samplers.demask import dependence_bounded_set

# four positions in confidence order 0, 1, 2, 3; I(0,2) = 0.3, I(1,2) = 0.3, I(0,3) = 0.1,
# I(1,3) = 0.1, I(0,1) = 0.02
MI = torch.zeros(1, 4, 4, dtype=torch.float64)
for i, j, v in [(0, 2, 0.3), (1, 2, 0.3), (0, 3, 0.1), (1, 3, 0.1), (0, 1, 0.02)]:
    MI[0, i, j] = MI[0, j, i] = v
SCORES = torch.tensor([[0.9, 0.8, 0.7, 0.6]])
ALL = torch.ones(1, 4, dtype=torch.bool)


@pytest.mark.parametrize("bound,aggregate,expected", [
    (0.1, "max", [0, 1, 3]),  # 2 meets 0.3 with 0; 3 meets at most 0.1
    (0.1, "sum", [0, 1]),  # 3 adds 0.1 + 0.1 = 0.2
    (0.2, "sum", [0, 1, 3]),
    (0.3, "max", [0, 1, 2, 3]),
    (0.3, "sum", [0, 1, 3]),  # 2 adds 0.6
    (0.01, "max", [0]),  # 1 meets 0.02 with 0, 2 meets 0.3, 3 meets 0.1
])
def test_greedy_under_the_bound(bound, aggregate, expected):
    got = dependence_bounded_set(MI, SCORES, ALL, bound, aggregate)
    assert got[0].nonzero().flatten().tolist() == expected


def test_order_is_confidence_and_the_first_is_free():
    # 2 first (most confident): 0 and 1 meet 0.3 with it, 3 meets nothing
    got = dependence_bounded_set(MI, torch.tensor([[0.1, 0.2, 0.9, 0.3]]), ALL, 0.05)
    assert got[0].nonzero().flatten().tolist() == [2, 3]
    elig = torch.tensor([[True, False, True, True]])
    got = dependence_bounded_set(MI, SCORES, elig, 0.1, "max")
    assert got[0].nonzero().flatten().tolist() == [0, 3]


def exact_demask(model, bound, aggregate="max"):
    s = make_sampler("demask", bound=bound, aggregate=aggregate)
    s._mi.mutual_information = lambda state: model.conditional_mi(state.tokens)
    return s


def test_select_reads_the_dependence_head():
    m = ExactJointMDM(n=4, v=2, seed=0)
    s = exact_demask(m, 0.0)
    s._mi.mutual_information = lambda state: MI
    assert s.select(hand_state(SCORES)).reveal[0].tolist() == [True, False, False, False]
    s = exact_demask(m, 0.1)
    s._mi.mutual_information = lambda state: MI
    assert s.select(hand_state(SCORES)).reveal[0].tolist() == [True, True, False, True]


@pytest.mark.parametrize("bound", [0.0, 0.01, 0.1])
def test_with_exact_mi_no_pass_reveals_a_pair_over_the_bound(bound):
    m = ExactJointMDM(n=6, v=2, seed=4, concentration=0.4)
    x = torch.full((4, 6), m.mask_id)
    x[1, 0] = int(m.conditionals(x[1:2])[0, 0].argmax())
    res = decode(m, x, exact_demask(m, bound), DecodeConfig(record_history=True))
    prev = x
    for state in res.history:
        mi = m.conditional_mi(prev)
        new = (state != prev) & (prev == m.mask_id)
        pair = new[:, :, None] & new[:, None, :]
        assert not (pair & (mi > bound + 1e-12)).any()
        prev = state
    assert not (res.tokens == m.mask_id).any()


def test_zero_bound_on_dependent_joint_is_sequential_and_large_bound_one_pass():
    m = ExactJointMDM(n=5, v=3, seed=1, concentration=0.3)
    x = torch.full((2, 5), m.mask_id)
    seq = decode(m, x, "confidence")
    res = decode(m, x, exact_demask(m, 0.0))
    # the peaked joint couples every pair of masked positions: one at a time, as sequential
    assert torch.equal(res.reveal_step, seq.reveal_step)
    assert torch.equal(res.tokens, seq.tokens)
    assert decode(m, x, exact_demask(m, 100.0)).nfe.tolist() == [1, 1]


@pytest.mark.parametrize("bad", [{"bound": -0.1}, {"aggregate": "mean"}])
def test_bad_parameters(bad):
    with pytest.raises(UnmaskError, match=next(iter(bad))):
        make_sampler("demask", **bad)
