"""DAPD (arXiv 2603.12996): the transformer's attention weights on request, the greedy
independent set on hand-built graphs, and its limits on a transformer."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as hs
from scan_reference import dapd_dependence_reference, taken_scan_reference
from stepstate import hand_state

from unmask import DecodeConfig, UnmaskError, decode, make_sampler
from unmask.host_reads import as_on_accelerators
from unmask.models import MDMTransformer, TransformerConfig
from unmask.models.base import ModelOutput
from unmask.samplers.dapd import greedy_independent_set


def grid_model():
    torch.manual_seed(1)
    cfg = TransformerConfig(vocab_size=5, mask_id=4, max_length=16, d_model=16, n_layers=2,
                            n_heads=2, d_ff=32, n_loops=2, position="grid", grid_side=4,
                            grid_box=2, relation_bias=True)
    m = MDMTransformer(cfg).eval()
    with torch.no_grad():
        for blk in m.blocks:
            blk.rel_bias.normal_()
    return m


@pytest.mark.parametrize("which", ["tiny", "grid"])
def test_attentions_on_request_change_nothing_else(which, tiny_transformer):
    m = tiny_transformer if which == "tiny" else grid_model()
    x = torch.randint(0, 4, (3, m.max_length), generator=torch.Generator().manual_seed(0))
    x[:, ::2] = m.mask_id
    plain = m(x)
    full = m(x, output_attentions=True)
    assert plain.attentions is None
    assert torch.allclose(full.logits, plain.logits, atol=1e-5)
    att = full.attentions
    assert len(att) == m.config.n_layers * m.config.n_loops
    assert all(a.shape == (3, m.config.n_heads, m.max_length, m.max_length) for a in att)
    assert torch.allclose(att[0].sum(-1), torch.ones(()), atol=1e-5)
    # the first applied block's weights are its attention on the embedded input
    ref = m.blocks[0].attention_probs(m.embed(x), getattr(m, "relations", None))
    assert torch.allclose(att[0], ref, atol=1e-6)


def test_model_output_rows_pick_cat_carry_attentions():
    att = (torch.arange(4 * 2 * 3 * 3.0).view(4, 2, 3, 3),)
    out = ModelOutput(logits=torch.zeros(4, 3, 2), hidden=torch.zeros(4, 3, 1), attentions=att)
    assert torch.equal(out.rows(torch.tensor([2, 0])).attentions[0], att[0][[2, 0]])
    both = ModelOutput.cat([out.rows(torch.tensor([0, 1])), out.rows(torch.tensor([2, 3]))])
    assert torch.equal(both.attentions[0], att[0])
    evaluated = torch.tensor([[True, True], [True, False]])  # 3 sequences: rows' candidates
    picked = out.rows(torch.tensor([0, 1, 2])).pick(evaluated, torch.tensor([1, 1]))
    assert torch.equal(picked.attentions[0][0], att[0][1])
    assert torch.equal(picked.attentions[0][1], torch.zeros(2, 3, 3))  # not evaluated
    # a caller that knows every chosen candidate was evaluated skips the zeroing: same rows
    three = out.rows(torch.tensor([0, 1, 2]))
    for choice in ([1, 0], [0, 0]):
        want, got = (three.pick(evaluated, torch.tensor(choice), all_chosen_evaluated=flag)
                     for flag in (False, True))
        assert torch.equal(got.attentions[0], want.attentions[0])
        assert torch.equal(got.logits, want.logits) and torch.equal(got.hidden, want.hidden)


def path_graph(n):
    adj = torch.zeros(1, n, n, dtype=torch.bool)
    i = torch.arange(n - 1)
    adj[0, i, i + 1] = adj[0, i + 1, i] = True
    return adj


@pytest.mark.parametrize("scores,expected", [
    ([0.9, 0.8, 0.7, 0.6], [0, 2]),  # 0 taken, 1 touches it, 2 free, 3 touches 2
    ([0.5, 0.9, 0.8, 0.7], [1, 3]),  # 1 first: 0 and 2 touch it
    ([0.6, 0.7, 0.9, 0.8], [0, 2]),  # 2 first, 3 and 1 touch it, 0 free
])
def test_greedy_independent_set_on_a_path(scores, expected):
    s = torch.tensor([scores])
    ones = torch.ones(1, 4, dtype=torch.bool)
    got = greedy_independent_set(path_graph(4), s, ones, ones)
    assert got[0].nonzero().flatten().tolist() == expected


def test_the_most_confident_is_taken_even_when_no_candidate():
    s = torch.tensor([[0.9, 0.8, 0.7, 0.6]])
    none = torch.zeros(1, 4, dtype=torch.bool)
    ones = torch.ones(1, 4, dtype=torch.bool)
    got = greedy_independent_set(path_graph(4), s, none, ones)
    assert got[0].nonzero().flatten().tolist() == [0]
    # not eligible: never taken, nor does it block a neighbour
    elig = torch.tensor([[False, True, True, True]])
    got = greedy_independent_set(path_graph(4), s, ones, elig)
    assert got[0].nonzero().flatten().tolist() == [1, 3]


def attention_state(pairs, n=4, conf=(0.9, 0.8, 0.7, 0.6), heads=2):
    """A state whose head-mean attention A has weight w on i->j for (i, j, w) in pairs and
    spreads the rest of each row uniformly over the others."""
    a = torch.zeros(n, n, dtype=torch.float64)
    for i, j, w in pairs:
        a[i, j] = w
    rest = (1 - a.sum(1, keepdim=True)) / (n - (a > 0).sum(1, keepdim=True))
    a = torch.where(a > 0, a, rest)
    att = (a.expand(1, heads, n, n).clone(),)
    return hand_state([list(conf)], attentions=att)


def test_select_edges_are_symmetrised_weights_above_tau_over_n():
    # N = 4: uniform weight 1/4 scores 1; pair (0, 1) reads 0.55 one way, 0.15 back:
    # N * (0.55 + 0.15) / 2 = 1.4
    st = attention_state([(0, 1, 0.55), (1, 0, 0.15)])
    assert make_sampler("dapd", tau=1.5).select(st).reveal[0].tolist() == [True] * 4
    assert make_sampler("dapd", tau=1.3).select(st).reveal[0].tolist() == [
        True, False, True, True]


def test_min_confidence_holds_back_the_unsure():
    st = attention_state([])
    got = make_sampler("dapd", tau=10.0, min_confidence=0.75).select(st).reveal
    assert got[0].tolist() == [True, True, False, False]


def test_a_model_without_attention_weights_is_refused(toy):
    x = torch.full((1, 5), toy.mask_id)
    with pytest.raises(UnmaskError, match="attention"):
        decode(toy, x, make_sampler("dapd"))


def test_layer_out_of_range_is_refused(tiny_transformer):
    x = torch.full((1, 12), tiny_transformer.mask_id)
    with pytest.raises(UnmaskError, match="layer"):
        decode(tiny_transformer, x, make_sampler("dapd", layer=2))


def test_tau_zero_is_sequential_and_a_huge_tau_one_pass(tiny_transformer):
    m = tiny_transformer
    x = torch.full((4, 12), m.mask_id)
    x[1, ::3] = 2
    seq = decode(m, x, "confidence")
    # softmax weights are never 0: at tau = 0 every pair is an edge
    for layer in (None, -1, 0):
        one = decode(m, x, make_sampler("dapd", tau=0.0, layer=layer))
        assert torch.equal(one.tokens, seq.tokens)
        assert torch.equal(one.reveal_step, seq.reveal_step)
    assert decode(m, x, make_sampler("dapd", tau=1e9)).nfe.tolist() == [1, 1, 1, 1]


def test_each_pass_reveals_an_independent_set(tiny_transformer):
    m = tiny_transformer
    x = torch.full((3, 12), m.mask_id)
    s = make_sampler("dapd", tau=1.0)
    res = decode(m, x, s, DecodeConfig(record_history=True))
    prev = x
    for state in res.history:
        att = m(prev, output_attentions=True).attentions
        a = torch.stack([w.double().mean(1) for w in att]).mean(0)
        dep = 12 * (a + a.transpose(1, 2)) / 2
        new = (state != prev) & (prev == m.mask_id)
        pair = new[:, :, None] & new[:, None, :] & ~torch.eye(12, dtype=torch.bool)
        assert not (pair & (dep > 1.0 + 1e-6)).any()
        prev = state


@pytest.mark.parametrize("bad", [{"tau": -1.0}, {"layer": 1.5}, {"min_confidence": 2.0}])
def test_bad_parameters(bad):
    with pytest.raises(UnmaskError, match=next(iter(bad))):
        make_sampler("dapd", **bad)


@hs.composite
def attention_inputs(draw):
    """(attention layers (B, H, N, N), confidences (B, N), eligible (B, N), tau): on a dyadic
    grid (every sum exact, so an edge weight equal to tau is met exactly) or arbitrary
    floats, float32 or float64, with ties in the confidences."""
    b, n = draw(hs.integers(1, 3)), draw(hs.integers(1, 9))
    layers, heads = draw(hs.integers(1, 3)), draw(hs.integers(1, 6))
    gen = torch.Generator().manual_seed(draw(hs.integers(0, 2**32 - 1)))
    dtype = draw(hs.sampled_from([torch.float32, torch.float64]))
    grid = draw(hs.booleans())
    att = []
    for _ in range(layers):
        w = torch.rand(b, heads, n, n, generator=gen, dtype=torch.float64)
        att.append(((w * 8).floor() / 8 if grid else w).to(dtype))
    conf = (torch.randint(0, 3, (b, n), generator=gen) / 2.0 if draw(hs.booleans())
            else torch.rand(b, n, generator=gen))
    eligible = torch.rand(b, n, generator=gen) < draw(hs.sampled_from([0.5, 1.0]))
    scale = n / (2 * layers * heads)
    tau = (draw(hs.integers(0, 16 * layers * heads)) / 8 * scale if grid
           else draw(hs.floats(0.0, 2.0)))
    return tuple(att), conf, eligible, tau


@settings(max_examples=200, deadline=None)
@given(attention_inputs(), hs.sampled_from([0.0, 0.4]))
def test_the_host_scan_takes_the_set_of_the_dependence_as_summed_before(inputs, min_conf):
    """On the CPU, DAPD's set with each taken position's edges computed from the attention
    when it is taken is the greedy scan over the full dependence as it was summed before
    (heads in one reduction) and the same as the tensor path of an accelerator."""
    att, conf, eligible, tau = inputs
    sampler = make_sampler("dapd", tau=tau, min_confidence=min_conf)
    state = hand_state(conf, eligible, attentions=att)
    got = sampler.select(state).reveal
    with as_on_accelerators():
        assert torch.equal(sampler.select(state).reveal, got)
    adjacency = dapd_dependence_reference(att) > tau
    candidates = state.eligible & (state.x0_prob >= min_conf)
    want = taken_scan_reference(state.x0_prob, state.eligible, adjacency, 0, "max",
                                candidates)
    assert torch.equal(got, want)
