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


def _decode(model, x, sampler, **config):
    return decode(model, x, sampler, DecodeConfig(block_size=3, record_history=True, **config),
                  seed=5)


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
