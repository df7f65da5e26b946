"""Exact behaviour of the loop and the greedy samplers on the exact toy MDM."""

import itertools
import math

import pytest
import torch

from unmask import DecodeConfig, ExactJointMDM, UnmaskError, decode, make_sampler


def chain_of_conditionals_mode(model: ExactJointMDM, x: torch.Tensor) -> list[int]:
    """Sequential argmax decoding by max-probability, done by hand from the joint table."""
    x = x.clone()
    while (x == model.mask_id).any():
        p = model.conditionals(x[None])[0]  # (N, V)
        conf = p.max(-1).values.masked_fill(x != model.mask_id, -1.0)
        i = int(conf.argmax())
        x[i] = int(p[i].argmax())
    return x.tolist()


def test_sequential_confidence_follows_exact_conditionals(toy):
    x = torch.full((1, 5), toy.mask_id)
    res = decode(toy, x, "confidence")
    assert res.tokens[0].tolist() == chain_of_conditionals_mode(toy, x[0])
    assert res.nfe.tolist() == [5]
    # cumulative entropy is the sum of the entropies of each revealed position at its step
    y, total = x[0].clone(), 0.0
    for _ in range(5):
        p = toy.conditionals(y[None])[0]
        conf = p.max(-1).values.masked_fill(y != toy.mask_id, -1.0)
        i = int(conf.argmax())
        total += float(torch.special.entr(p[i]).sum())
        y[i] = int(p[i].argmax())
    assert res.cumulative_entropy[0].item() == pytest.approx(total, abs=1e-12)


def test_one_shot_reveals_independent_argmaxes(toy):
    x = torch.full((1, 5), toy.mask_id)
    res = decode(toy, x, make_sampler("topk", k=5))
    marg = toy.conditionals(x)[0]
    assert res.tokens[0].tolist() == marg.argmax(-1).tolist()
    assert res.nfe.tolist() == [1]


def test_product_joint_parallel_equals_sequential():
    # independent positions: parallel decoding loses nothing
    ps = [torch.tensor([0.7, 0.2, 0.1]), torch.tensor([0.1, 0.3, 0.6]),
          torch.tensor([0.25, 0.5, 0.25])]
    joint = torch.einsum("a,b,c->abc", *[p.double() for p in ps])
    joint = joint / joint.sum()
    m = ExactJointMDM(joint)
    x = torch.full((1, 3), m.mask_id)
    assert decode(m, x, "confidence").tokens.tolist() == decode(
        m, x, make_sampler("topk", k=3)).tokens.tolist() == [[0, 2, 1]]


def test_sampling_follows_the_joint():
    # temperature 1 ancestral-style decoding of an exact model samples from the joint
    joint = torch.tensor([[0.5, 0.1], [0.0, 0.4]]).double()
    m = ExactJointMDM(joint)
    x = torch.full((4000, 2), m.mask_id)
    res = decode(m, x, "uniform", DecodeConfig(temperature=1.0), seed=0)
    counts = torch.zeros(2, 2)
    for a, b in itertools.product(range(2), range(2)):
        counts[a, b] = ((res.tokens[:, 0] == a) & (res.tokens[:, 1] == b)).float().mean()
    assert counts[1, 0] == 0  # impossible state never produced
    assert torch.allclose(counts, joint.float(), atol=0.03)


def test_schedules_reach_the_end_in_steps():
    m = ExactJointMDM(n=6, v=2, seed=4)
    x = torch.full((2, 6), m.mask_id)
    for schedule in ("linear", "cosine"):
        res = decode(m, x, make_sampler("confidence", steps=3, schedule=schedule))
        assert res.steps.tolist() == [3, 3]
    lin = decode(m, x[:1], make_sampler("entropy", steps=3), DecodeConfig(record_history=True))
    revealed = [int((h != m.mask_id).sum()) for h in lin.history]
    assert revealed == [2, 4, 6]
    cos = decode(m, x[:1], make_sampler("entropy", steps=3, schedule="cosine"),
                 DecodeConfig(record_history=True))
    # cosine keeps floor(6 cos(pi/6)) = 5 then floor(6 cos(pi/3)) = 3 masks
    assert [int((h != m.mask_id).sum()) for h in cos.history] == [1, 3, 6]


def test_eb_prefix_rule(toy):
    x = torch.full((1, 5), toy.mask_id)
    out = toy(x)
    h = torch.special.entr(torch.softmax(out.logits[0, :, :3], -1)).sum(-1)
    hs = sorted(h.tolist())
    for gamma in (0.0, 0.3, 1.0, 10.0):
        res = decode(toy, x, make_sampler("eb", gamma=gamma), DecodeConfig(record_history=True))
        first = int((res.history[0] != toy.mask_id).sum())
        want = max(k for k in range(1, 6) if sum(hs[:k]) - max(hs[:k]) <= gamma + 1e-12)
        assert first == want, gamma


def test_threshold_rule(toy):
    x = torch.full((1, 5), toy.mask_id)
    conf = torch.softmax(toy(x).logits[0, :, :3], -1).max(-1).values
    for tau in (0.0, float(conf.median()), 1.0):
        res = decode(toy, x, make_sampler("threshold", tau=tau), DecodeConfig(record_history=True))
        first = int((res.history[0] != toy.mask_id).sum())
        assert first == max(1, int((conf >= tau).sum()))


@pytest.mark.parametrize("bad, field", [
    (dict(name="confidence", k=0), "k"),
    (dict(name="eb", gamma=-1.0), "gamma"),
    (dict(name="threshold", tau=2.0), "tau"),
    (dict(name="confidence", schedule="square"), "schedule"),
    (dict(name="confidence", bogus=1), "bogus"),
    (dict(name="nope"), "nope"),
])
def test_bad_sampler_config_names_the_field(bad, field):
    with pytest.raises(UnmaskError, match=field):
        make_sampler(**bad)


def test_bad_inputs_name_the_problem(toy):
    with pytest.raises(UnmaskError, match="shape"):
        decode(toy, torch.zeros(5, dtype=torch.long), "confidence")
    with pytest.raises(UnmaskError, match="outside the vocabulary"):
        decode(toy, torch.full((1, 5), 7), "confidence")
    with pytest.raises(UnmaskError, match="max_length"):
        decode(toy, torch.full((1, 6), toy.mask_id), "confidence")
    with pytest.raises(UnmaskError, match="block_size"):
        decode(toy, torch.full((1, 5), toy.mask_id), "confidence", DecodeConfig(block_size=2))
    with pytest.raises(UnmaskError, match="temperature"):
        DecodeConfig(temperature=-1)
    with pytest.raises(UnmaskError, match="dtype"):
        decode(toy, torch.zeros(1, 5), "confidence")


def test_entropy_in_nats(toy):
    joint = torch.full((2, 2), 0.25).double()
    m = ExactJointMDM(joint)
    res = decode(m, torch.full((1, 2), m.mask_id), "confidence")
    assert res.cumulative_entropy.item() == pytest.approx(2 * math.log(2))
