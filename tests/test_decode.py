"""Exact behaviour of the loop and the greedy samplers on the exact toy MDM."""

import itertools
import math
from types import SimpleNamespace

import pytest
import torch

from unmask import DecodeConfig, ExactJointMDM, UnmaskError, decode, make_sampler

#: CI reruns these under every CPU kernel set and thread count (make test-kernels)
pytestmark = pytest.mark.kernels


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


def joint_frequencies(tokens: torch.Tensor) -> torch.Tensor:
    """(2, 2) frequency of each outcome of two binary positions over the rows of ``tokens``."""
    counts = torch.zeros(2, 2, dtype=torch.float64)
    for a, b in itertools.product(range(2), range(2)):
        counts[a, b] = ((tokens[:, 0] == a) & (tokens[:, 1] == b)).double().mean()
    return counts


def test_confidence_of_the_draw_is_mode_seeking_and_max_is_exact():
    # marginals (0.6, 0.4) and (0.5, 0.5). Ranking by the drawn token's probability reveals
    # position 0 first when it drew 0 (0.6 > 0.5), else position 1: P(0, 0) =
    # 0.6 * 5/6 + 0.4 * 0.5 * 1 = 0.7, P(0, 1) = 0.6 * 1/6 + 0.4 * 0.5 * 0.2 = 0.14,
    # P(1, 1) = 0.4 * 0.5 * 0.8 = 0.16. Ranking by the largest probability always reveals
    # position 0 first: ancestral sampling, the joint itself.
    joint = torch.tensor([[0.5, 0.1], [0.0, 0.4]]).double()
    m = ExactJointMDM(joint)
    x = torch.full((4000, 2), m.mask_id)
    drawn = decode(m, x, "confidence", DecodeConfig(temperature=1.0), seed=0)
    largest = decode(m, x, "confidence", DecodeConfig(temperature=1.0, confidence="max"),
                     seed=0)
    expected_drawn = torch.tensor([[0.7, 0.14], [0.0, 0.16]]).double()
    assert torch.allclose(joint_frequencies(drawn.tokens), expected_drawn, atol=0.03)
    assert torch.allclose(joint_frequencies(largest.tokens), joint, atol=0.03)


@pytest.mark.parametrize("spec", ["confidence", "topk:k=2", "threshold:tau=0.5", "info-gain",
                                  "eb:gamma=0.1,order=confidence+verify=0.01", "klass"])
def test_confidence_max_equals_draw_at_temperature_zero(toy, spec):
    x = torch.full((3, 5), toy.mask_id)
    x[1, 2] = 0
    a = decode(toy, x, spec, DecodeConfig(), seed=3)
    b = decode(toy, x, spec, DecodeConfig(confidence="max"), seed=3)
    assert torch.equal(a.tokens, b.tokens) and torch.equal(a.nfe, b.nfe)
    assert torch.equal(a.sequences, b.sequences)


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
    with pytest.raises(UnmaskError, match="temperature"):
        DecodeConfig(temperature=-1)
    with pytest.raises(UnmaskError, match="dtype"):
        decode(toy, torch.zeros(1, 5), "confidence")


@pytest.mark.parametrize("cut", [0, 1, 2])
def test_blocks_count_back_from_the_row_end(toy, cut):
    """A block that does not divide the row: the first block holds the rest (5 = 1 + 2 + 2),
    so masks after a prompt of any length sit in whole blocks."""
    x = torch.full((2, 5), toy.mask_id)
    x[:, :cut] = torch.tensor([[1, 0], [0, 1]])[:, :cut]
    res = decode(toy, x, "confidence", DecodeConfig(block_size=2))
    block_of = (torch.arange(5) + 1) // 2  # (N,): blocks [0], [1, 2], [3, 4]
    for row in range(2):
        step = res.reveal_step[row]
        for b in range(3):  # every position of block b is revealed before any of block b + 1
            inside, after = step[(block_of == b) & (step >= 0)], step[block_of > b]
            assert not len(inside) or not len(after) or inside.max() < after.min()
    assert (res.reveal_step[:, :cut] == -1).all() and (res.reveal_step[:, cut:] >= 0).all()
    if cut == 0:  # the one-position first block takes the first pass
        assert res.reveal_step[:, 0].tolist() == [0, 0]


def test_entropy_in_nats(toy):
    joint = torch.full((2, 2), 0.25).double()
    m = ExactJointMDM(joint)
    res = decode(m, torch.full((1, 2), m.mask_id), "confidence")
    assert res.cumulative_entropy.item() == pytest.approx(2 * math.log(2))


def test_bad_arguments_are_refused_with_one_line(toy):
    x = torch.full((1, 5), toy.mask_id)
    with pytest.raises(UnmaskError, match="sampler: expected a Sampler or a registered name, "
                                          "got NoneType"):
        decode(toy, x, None)
    with pytest.raises(UnmaskError, match="config: expected a DecodeConfig or None, got dict"):
        decode(toy, x, "confidence", {"temperature": 1.0})
    with pytest.raises(UnmaskError, match="hooks: expected Hook objects, got str"):
        decode(toy, x, "confidence", hooks=("remask",))
    with pytest.raises(UnmaskError, match="tokens: expected a"):
        decode(toy, [[toy.mask_id] * 5], "confidence")
    with pytest.raises(UnmaskError, match="seed: expected"):
        decode(toy, x, "confidence", seed=1.5)
    for bad in ({"temperature": True}, {"temperature": "0.5"}, {"block_size": True},
                {"block_size": 0}, {"record_history": 1}, {"self_condition": None},
                {"confidence": "drawn"}):
        with pytest.raises(UnmaskError, match=next(iter(bad))):
            DecodeConfig(**bad)


def test_empty_batches_decode_to_empty_results(toy, tiny_transformer):
    none = decode(toy, torch.zeros(0, 5, dtype=torch.long), "topk")
    assert none.tokens.shape == (0, 5) and none.nfe.shape == (0,)
    assert none.reveal_step.shape == (0, 5) and none.stats == {}
    from unmask import Verified

    for model in (toy, tiny_transformer):
        empty = decode(model, torch.zeros(2, 0, dtype=torch.long), Verified(make_sampler("eb")),
                       DecodeConfig(block_size=3))
        assert empty.tokens.shape == (2, 0) and empty.nfe.tolist() == [0, 0]
        assert empty.stats["rejected"].tolist() == [0, 0]


def test_make_sampler_checks_each_field_type():
    import numpy as np

    with pytest.raises(UnmaskError, match=r"sampler 'eb': gamma: expected a number, got '0.1'"):
        make_sampler("eb", gamma="0.1")
    with pytest.raises(UnmaskError, match="k: expected an integer, got True"):
        make_sampler("topk", k=True)
    with pytest.raises(UnmaskError, match="k: expected an integer, got 2.0"):
        make_sampler("topk", k=2.0)
    with pytest.raises(UnmaskError, match="steps: expected an integer or None"):
        make_sampler("topk", steps="3")
    with pytest.raises(UnmaskError, match="order: expected a string, got 1"):
        make_sampler("eb", order=1)
    with pytest.raises(UnmaskError, match="free_max: expected True or False or None, got 1"):
        make_sampler("mi-guided", free_max=1)
    with pytest.raises(UnmaskError, match="sampler: expected a name"):
        make_sampler(None)
    topk = make_sampler("topk", k=np.int64(3), steps=None)
    assert topk.k == 3 and type(topk.k) is int
    eb = make_sampler("eb", gamma=np.float32(0.5))
    assert type(eb.gamma) is float and make_sampler("eb", gamma=1).gamma == 1
    assert make_sampler("mi-guided", free_max=np.bool_(True)).free_max is True


def test_decode_stays_short():
    """The loop is a short function; features compose around it (samplers, hooks)."""
    import inspect

    from unmask.decode import decode as fn

    assert len(inspect.getsource(fn).splitlines()) <= 80


def test_a_spec_string_is_a_sampler(toy):
    x = torch.full((3, 5), toy.mask_id)
    by_spec = decode(toy, x, "eb:gamma=0.5,order=confidence+verify=0.1", seed=2)
    from unmask import Verified

    by_object = decode(toy, x, Verified(make_sampler("eb", gamma=0.5, order="confidence"),
                                        tolerance=0.1), seed=2)
    assert torch.equal(by_spec.tokens, by_object.tokens)
    assert torch.equal(by_spec.stats["rejected"], by_object.stats["rejected"])
    with pytest.raises(UnmaskError, match="hooks=corrector_hooks"):
        decode(toy, x, "eb+corrector")


@pytest.mark.parametrize("schedule", ["linear", "cosine"])
def test_a_count_schedule_of_many_steps_keeps_a_small_table_and_its_formula(schedule):
    """steps = 10**9 over 40 positions: the table is 41 x 41 (not 41 x 10**9, which took
    GBs), and a block step past it (only where tokens went back to MASK) reads the formula."""
    steps, n = 10**9, 40
    rule = make_sampler("confidence", steps=steps, schedule=schedule)
    assert rule.masks_left(n, torch.device("cpu")).shape == (n + 1, n + 1)
    step = torch.tensor([0, 39, 40, 41, 10**6, steps + 3])
    masked = torch.tensor([9, 9, 30, 30, 30, 30])
    eligible = torch.zeros(6, n, dtype=torch.bool)
    eligible[:, :12] = True
    state = SimpleNamespace(eligible=eligible, tokens=torch.zeros(6, n, dtype=torch.long),
                            step=step, block_masked=masked)
    want = []
    for s, m in zip(step.tolist(), masked.tolist(), strict=True):
        f = min((min(s, steps - 1) + 1) / steps, 1.0)
        left = 1.0 - f if schedule == "linear" else math.cos(math.pi / 2 * f)
        want.append(min(max(12 - math.floor(m * left + 1e-9), 1), 12))
    assert rule.count(state).tolist() == want


@pytest.mark.parametrize("schedule", ["linear", "cosine"])
@pytest.mark.parametrize("steps", [1, 3, 8, 37])
def test_the_count_schedule_is_its_formula(schedule, steps):
    """CountRule's masks left after step s of a block entered with m masks (its table) is
    floor(m * left(s) + 1e-9), left = 1 - f or cos(pi/2 f), f = min((s + 1) / steps, 1), in
    float64, and a pass reveals what the table leaves, at least 1, at most what is left."""
    rule = make_sampler("confidence", steps=steps, schedule=schedule)
    n = 40
    table = rule.masks_left(n, torch.device("cpu"))
    for s in range(steps):
        f = min((s + 1) / steps, 1.0)
        left = 1.0 - f if schedule == "linear" else math.cos(math.pi / 2 * f)
        assert table[:, s].tolist() == [math.floor(m * left + 1e-9) for m in range(n + 1)]
    assert table[:, -1].tolist() == [0] * (n + 1)  # the last step empties the block
    eligible = torch.zeros(4, n, dtype=torch.bool)
    eligible[:, :9] = True
    state = SimpleNamespace(eligible=eligible, tokens=torch.zeros(4, n, dtype=torch.long),
                            step=torch.tensor([0, steps - 1, steps + 5, 1]),
                            block_masked=torch.tensor([9, 9, 9, 20]))
    left_after = table[[9, 9, 9, 20], [0, steps - 1, steps - 1, min(1, steps - 1)]]
    assert rule.count(state).tolist() == (9 - left_after).clamp(1, 9).tolist()


def test_passes_run_in_inference_mode_and_results_leave_it(toy):
    """The passes run in inference mode (no autograd bookkeeping on their small operations);
    nothing decode returns is an inference tensor, so each can be written in place."""
    from unmask.hooks import Hook, ReMDMRemask

    seen = []

    class Spy(Hook):
        def keep_rows(self, state):  # asked every pass
            seen.append(torch.is_inference_mode_enabled())
            return None

    x = torch.full((3, 5), toy.mask_id)
    res = decode(toy, x, "topk:k=2", DecodeConfig(record_history=True, temperature=0.5),
                 hooks=(Spy(), ReMDMRemask(eta=0.5)))
    assert seen and all(seen) and not torch.is_inference_mode_enabled()
    out = [res.tokens, res.nfe, res.sequences, res.steps, res.cumulative_entropy,
           res.reveal_step, *res.stats.values(), *res.history]
    assert len(res.stats) == 1 and len(res.history) == int(res.steps.max())
    assert not any(t.is_inference() for t in out)
    for t in out:
        t.add_(1)  # refused on an inference tensor outside inference mode
