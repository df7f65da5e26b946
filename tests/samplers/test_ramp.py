"""``+ramp``: the per-pass reveal cap max(min, floor(rate * known)), exact on the toy MDM."""

import pytest
import torch

from unmask import DecodeConfig, UnmaskError, Verified, decode, make_sampler
from unmask.models.toy import ExactJointMDM
from unmask.samplers.ramp import Ramp, entropy_prefix, ramp_cap
from unmask.samplers.spec import parse_spec


def per_pass(res, row=0):
    """How many positions each pass revealed in ``row``."""
    steps = res.reveal_step[row]
    steps = steps[steps >= 0]
    return torch.bincount(steps).tolist()


def test_the_cap_grows_with_what_is_known():
    known = torch.tensor([0, 1, 3, 4, 7, 8, 100])
    assert ramp_cap(known, 0.25, 1).tolist() == [1, 1, 1, 1, 1, 2, 25]
    assert ramp_cap(known, 0.5, 2).tolist() == [2, 2, 2, 2, 3, 4, 50]


def test_the_entropy_budget_keeps_the_longest_prefix_within_it():
    """Scan order by score: positions 2, 0, 3 (1 not chosen); entropies 0.5, 0.2, 0.4:
    charges sum - max along the prefix 0, 0.2, 0.6."""
    entropy = torch.tensor([[0.2, 9.0, 0.5, 0.4]] * 3)
    scores = torch.tensor([[0.8, 0.99, 0.9, 0.1]] * 3)
    chosen = torch.tensor([[True, False, True, True]] * 3)
    keep = entropy_prefix(entropy, scores, chosen, torch.tensor([0.0, 0.3, 0.6]))
    assert keep.tolist() == [[False, False, True, False], [True, False, True, False],
                             [True, False, True, True]]


def test_the_entropy_ramp_starts_sequential_and_widens_with_the_context():
    """Budget rate * known nats: nothing known -> one position; later the inner sampler's
    confident positions go together. On a joint of 8 independent near-deterministic
    positions (entropy ~0.06 nats each) and rate 0.1: pass 1 reveals 1 (budget 0), pass 2
    reveals 2 (budget 0.1: the second position charged 0.06, the third 0.12), pass 3 with 3
    known reveals 5 (0.3 nats: 4 charged 0.24)..."""
    p = torch.tensor([0.99, 0.01])
    joint = p
    for _ in range(7):
        joint = torch.einsum("...i,j->...ij", joint, p)
    model = ExactJointMDM(joint)
    x = torch.full((1, 8), model.mask_id)
    res = decode(model, x, Ramp(make_sampler("topk", k=8), rate=0.1, budget="entropy"),
                 DecodeConfig(), seed=0)
    h = float(-(p * p.log()).sum())
    known, want = 0, []
    while known < 8:
        take = min(1 + int(known * 0.1 / h + 1e-9), 8 - known)  # the first uncharged, h each
        want.append(take)
        known += take
    assert per_pass(res) == want == [1, 2, 5]


def test_from_nothing_the_passes_follow_the_cap_exactly(toy):
    """N = 5 all masked, an inner rule that would take all: known 0, 1 -> 1 position each;
    known 2 -> 2; known 4 -> the last one: 1, 1, 2, 1."""
    x = torch.full((3, 5), toy.mask_id)
    res = decode(toy, x, Ramp(make_sampler("topk", k=5), rate=1.0), DecodeConfig(), seed=0)
    assert all(per_pass(res, r) == [1, 1, 2, 1] for r in range(3))
    assert res.nfe.tolist() == [4, 4, 4]


def test_it_keeps_the_inner_samplers_best_positions(toy):
    """Capped at one a pass, topk:k=5 is sequential confidence decoding: the same tokens
    and the same order."""
    x = torch.full((2, 5), toy.mask_id)
    capped = decode(toy, x, Ramp(make_sampler("topk", k=5), rate=1e-3), DecodeConfig(),
                    seed=0)
    sequential = decode(toy, x, make_sampler("confidence"), DecodeConfig(), seed=0)
    assert torch.equal(capped.tokens, sequential.tokens)
    assert torch.equal(capped.reveal_step, sequential.reveal_step)


def test_first_pass_reveals_the_most_confident_position_exactly(toy):
    """The first pass's one position is the argmax over positions of max_v p(x_i = v), from
    the joint's marginals, with its argmax token."""
    x = torch.full((1, 5), toy.mask_id)
    res = decode(toy, x, Ramp(make_sampler("topk", k=5), rate=0.5), DecodeConfig(), seed=0,
                 )
    marginals = toy.conditionals(x)[0]  # (N, V)
    first = int(marginals.max(-1).values.argmax())
    assert int((res.reveal_step[0] == 0).nonzero()) == first
    assert int(res.tokens[0, first]) == int(marginals[first].argmax())


def test_with_context_known_the_inner_sampler_is_unchanged():
    """Given 6 of 8 positions, rate 1 allows 6 a pass: the inner rule decides alone."""
    model = ExactJointMDM(n=8, v=2, seed=3, concentration=0.5)
    x = torch.tensor([[0, 1, 0, 1, 1, 0, model.mask_id, model.mask_id]])
    inner = make_sampler("topk", k=2)
    a = decode(model, x, Ramp(inner, rate=1.0), DecodeConfig(temperature=1.0), seed=5)
    b = decode(model, x, make_sampler("topk", k=2), DecodeConfig(temperature=1.0), seed=5)
    assert torch.equal(a.tokens, b.tokens) and a.nfe.tolist() == b.nfe.tolist() == [1]


def test_a_large_rate_is_the_inner_sampler(toy):
    x = torch.full((4, 5), toy.mask_id)
    x[1, 2] = 0
    for t in (0.0, 1.0):
        cfg = DecodeConfig(temperature=t)
        a = decode(toy, x, Ramp(make_sampler("eb", gamma=1.0), rate=1e6, min=5), cfg, seed=2)
        b = decode(toy, x, make_sampler("eb", gamma=1.0), cfg, seed=2)
        assert torch.equal(a.tokens, b.tokens) and torch.equal(a.nfe, b.nfe)


def test_the_spec_modifier_builds_it_around_the_sampler_and_under_verify():
    spec = parse_spec("eb:gamma=1.5,order=confidence+ramp=0.25,min=2")
    built = spec.build()
    assert isinstance(built, Ramp) and built.rate == 0.25 and built.min == 2
    assert built.inner.name == "eb" and built.inner.gamma == 1.5
    assert parse_spec(spec.text) == spec
    assert "ramp=0.25" in spec.label and "ramp=0.25" in built.label
    verified = parse_spec("eb:gamma=1.5+ramp=0.25+verify=0.03").build()
    assert isinstance(verified, Verified) and isinstance(verified.inner, Ramp)


@pytest.mark.parametrize("spec, message", [
    ("eb+ramp=0", "rate must be a number > 0"),
    ("eb+ramp=-1", "rate must be a number > 0"),
    ("eb+ramp=abc", "rate must be a number > 0"),
    ("eb+ramp=0.2,min=0", "min must be an integer >= 1"),
    ("eb+ramp=0.2,min=1.5", "min must be an integer >= 1"),
    ("eb+ramp=0.2,order=random", "order"),
    ("eb+ramp=0.2,speed=3", "unknown option"),
    ("eb+ramp=0.2,budget=time", "budget must be one of count, entropy"),
    ("lookum+ramp=0.2", "evaluates its next state itself"),
])
def test_bad_modifier_options_are_refused(spec, message):
    with pytest.raises(UnmaskError, match=message):
        parse_spec(spec)
