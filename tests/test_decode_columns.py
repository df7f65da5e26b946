"""Samplers that read eligible positions only get the pass computed over the current blocks:
the same tokens, passes and entropies as with every position computed, and really fewer
positions computed."""

import importlib

import pytest
import torch

from unmask import DecodeConfig, decode, make_sampler
from unmask.samplers.base import available_samplers, sampler_class
from unmask.samplers.wrapper import EveryPosition

loop = importlib.import_module("unmask.decode")  # the module (unmask.decode is the function)

#: CI reruns these under every CPU kernel set and thread count (make test-kernels)
pytestmark = pytest.mark.kernels

NARROW = sorted(n for n in available_samplers() if sampler_class(n).reads_eligible_only)
#: the samplers that read other positions (lookahead, MI, attention, KL history)
WHOLE_ROW = ("info-gain", "lookum", "klass", "demask", "mi-guided", "mi-oracle", "dapd")


def _decode(model, x, sampler, hooks=(), **config):
    return decode(model, x, sampler, DecodeConfig(block_size=3, record_history=True, **config),
                  seed=5, hooks=hooks)


def _same(a, b):
    assert torch.equal(a.tokens, b.tokens)
    assert torch.equal(a.nfe, b.nfe) and torch.equal(a.sequences, b.sequences)
    assert torch.equal(a.reveal_step, b.reveal_step)
    assert len(a.history) == len(b.history)
    assert torch.allclose(a.cumulative_entropy, b.cumulative_entropy, rtol=1e-5, atol=1e-6)


def _batch(model, rows=4, n=12):
    g = torch.Generator().manual_seed(0)
    x = torch.full((rows, n), model.mask_id)
    x[:, 0] = torch.randint(0, model.mask_id, (rows,), generator=g)
    x[1, 4] = 2  # a given token inside a later block
    x[2, :6] = torch.randint(0, model.mask_id, (6,), generator=g)  # starts two blocks later
    return x


def test_registry_declares_the_eligible_only_samplers():
    assert {"confidence", "topk", "entropy", "margin", "threshold", "eb", "factor", "pc",
            "uniform", "dus"} <= set(NARROW)
    assert set(WHOLE_ROW) | set(NARROW) == set(available_samplers())
    assert not set(WHOLE_ROW) & set(NARROW)
    assert not EveryPosition(make_sampler("confidence")).reads_eligible_only


@pytest.mark.parametrize("temperature,confidence", [(0.0, "draw"), (0.7, "max")])
@pytest.mark.parametrize("name", NARROW)
def test_columns_decode_equals_every_position(tiny_transformer, name, temperature, confidence):
    x = _batch(tiny_transformer)
    sampler = make_sampler(name)
    ours = _decode(tiny_transformer, x, sampler, temperature=temperature,
                   confidence=confidence)
    ref = _decode(tiny_transformer, x, EveryPosition(make_sampler(name)),
                  temperature=temperature, confidence=confidence)
    _same(ours, ref)


def test_pass_computes_the_current_blocks_only(tiny_transformer, monkeypatch):
    seen = []
    real = loop.real_log_probs

    def counting(logits, mask):
        seen.append(logits.shape[1])
        return real(logits, mask)

    monkeypatch.setattr(loop, "real_log_probs", counting)
    x = _batch(tiny_transformer)
    x[2] = x[0]  # every row in block 0 at first
    res = _decode(tiny_transformer, x, make_sampler("topk", k=3))
    assert seen == [3] * int(res.steps.max())  # rows move in lockstep: one block
    seen.clear()
    _decode(tiny_transformer, x, EveryPosition(make_sampler("topk", k=3)))
    assert set(seen) == {12}
    seen.clear()
    x = _batch(tiny_transformer)  # row 2 starts in block 2: blocks 0 to 2 at first
    _decode(tiny_transformer, x, make_sampler("topk", k=3))
    assert seen[0] == 9 and max(seen) <= 9


def test_hooks_and_self_conditioning_keep_every_position(tiny_transformer, monkeypatch):
    from unmask.hooks import Hook
    from unmask.models import MDMTransformer, TransformerConfig

    seen = []
    real = loop.real_log_probs
    monkeypatch.setattr(loop, "real_log_probs",
                        lambda logits, mask: seen.append(logits.shape[1]) or real(logits, mask))
    x = _batch(tiny_transformer)
    _decode(tiny_transformer, x, make_sampler("confidence"))
    assert max(seen) < 12
    seen.clear()
    decode(tiny_transformer, x, "confidence", DecodeConfig(block_size=3), hooks=[Hook()])
    assert set(seen) == {12}
    seen.clear()
    torch.manual_seed(0)
    sc = MDMTransformer(TransformerConfig(vocab_size=6, mask_id=5, max_length=12, d_model=16,
                                          n_layers=1, n_heads=2, d_ff=32,
                                          self_condition=True)).eval()
    decode(sc, x, "confidence", DecodeConfig(block_size=3))
    assert set(seen) == {12}


def test_one_block_is_the_whole_row(tiny_transformer):
    x = _batch(tiny_transformer)
    ours = decode(tiny_transformer, x, "entropy", seed=1)
    ref = decode(tiny_transformer, x, EveryPosition(make_sampler("entropy")), seed=1)
    assert torch.equal(ours.tokens, ref.tokens) and torch.equal(ours.nfe, ref.nfe)


@pytest.mark.parametrize("start, count", [(0, 12), (4, 5), (7, 2), (10, 2)])
@pytest.mark.parametrize("name, temperature", [("confidence", 0.0), ("entropy", 0.7),
                                               ("threshold", 0.0)])
def test_no_eos_hook_keeps_the_narrow_pass(tiny_transformer, monkeypatch, start, count, name,
                                           temperature):
    """``NoEOSIn`` bans EOS at absolute positions: computed over the current blocks only,
    the decode is that of every position computed, and the passes really are narrow."""
    from unmask.generate import NoEOSIn

    seen = []
    real = loop.real_log_probs
    monkeypatch.setattr(loop, "real_log_probs",
                        lambda logits, mask: seen.append(logits.shape[1]) or real(logits, mask))
    x = _batch(tiny_transformer)
    hooks = [NoEOSIn((1, 3), start, start + count)]
    ours = _decode(tiny_transformer, x, make_sampler(name), temperature=temperature,
                   hooks=hooks)
    narrow, seen[:] = list(seen), []
    ref = _decode(tiny_transformer, x, EveryPosition(make_sampler(name)),
                  temperature=temperature, hooks=hooks)
    _same(ours, ref)
    assert max(narrow) < 12 and set(seen) == {12}
    lo, hi = start, start + count
    revealed_in = ours.reveal_step[:, lo:hi] >= 0  # decoded there (not given)
    assert not bool(((ours.tokens[:, lo:hi] == 1) | (ours.tokens[:, lo:hi] == 3))
                    [revealed_in].any())


def test_no_eos_hook_on_a_narrow_slice_bans_the_right_positions():
    """The log-probabilities of the positions 4:8 with EOS banned at 6:10: positions 6 and 7
    (columns 2 and 3) lose EOS, the others are as given."""
    from unmask.generate import NoEOSIn

    hook = NoEOSIn((1,), 6, 10)
    hook.ban = torch.tensor([False, True, False])
    lp = torch.log_softmax(torch.randn(2, 4, 3, generator=torch.Generator().manual_seed(0)), -1)
    out = hook.adjust_log_probs(torch.arange(2), lp, slice(4, 8))
    assert torch.equal(out[:, :2], lp[:, :2])
    assert bool((out[:, 2:, 1] == -torch.inf).all())
    torch.testing.assert_close(out[:, 2:].exp().sum(-1), torch.ones(2, 2))
    whole = hook.adjust_log_probs(torch.arange(2), torch.cat([lp, lp], 1))  # positions 0:8
    assert torch.equal(whole[:, 4:], out) and torch.equal(whole[:, :6], torch.cat([lp, lp], 1)
                                                          [:, :6])
