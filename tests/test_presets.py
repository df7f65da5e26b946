"""Named decoding configurations (unmask.presets)."""

import pytest
import torch

from unmask import decode
from unmask.bench.sweep import timed_decode
from unmask.decode import DecodeConfig
from unmask.errors import UnmaskError
from unmask.presets import PRESETS, preset_spec
from unmask.samplers.spec import parse_spec, preset_entry
from unmask.samplers.verified import Verified


def preset_sampler(name: str):
    """A fresh sampler of preset ``name``: its spec, built."""
    return parse_spec(preset_spec(name)).build()


def test_the_three_presets_exist_and_parse():
    assert set(PRESETS) == {"lossless", "fast", "quality", "info-gain-authors",
                            "lookum-authors"}
    for name in PRESETS:
        parse_spec(preset_spec(name))  # a valid spec
        assert PRESETS[name].doc


def test_quality_is_sequential_decoding(toy):
    x = torch.full((3, 5), toy.mask_id)
    a = decode(toy, x, preset_sampler("quality"))
    b = decode(toy, x, "confidence")
    assert torch.equal(a.tokens, b.tokens) and torch.equal(a.nfe, b.nfe)
    assert a.nfe.tolist() == [5, 5, 5]


def test_a_preset_is_a_name_for_its_spec():
    for name, p in PRESETS.items():
        sampler, built = preset_sampler(name), parse_spec(p.spec).build()
        assert type(sampler) is type(built) and sampler.label == built.label
        if isinstance(sampler, Verified):
            assert (sampler.tolerance, sampler.prefixes, sampler.max_draft) == (
                built.tolerance, built.prefixes, built.max_draft)
        entry = preset_entry(name)
        assert entry.text == parse_spec(p.spec).text and entry.label.endswith(f"preset={name}")
    # fresh samplers every call (they hold per-decode state)
    assert preset_sampler("lossless") is not preset_sampler("lossless")


def test_parallel_presets_decode_in_fewer_passes(tiny_transformer):
    m = tiny_transformer
    x = torch.full((4, 12), m.mask_id)
    seq = decode(m, x, preset_sampler("quality"))
    for name in ("fast", "lossless"):
        res = decode(m, x, preset_sampler(name))
        assert (res.tokens != m.mask_id).all()
        assert res.nfe.sum() <= seq.nfe.sum()


def test_unknown_names_are_refused():
    with pytest.raises(UnmaskError, match="preset: unknown 'turbo'"):
        preset_spec("turbo")
    with pytest.raises(UnmaskError, match="preset: unknown"):
        preset_sampler("")


def test_a_preset_entry_benches_like_its_sampler(tiny_transformer):
    m = tiny_transformer
    x = torch.full((3, 12), m.mask_id)
    entry = preset_entry("fast")
    assert "preset=fast" in entry.label and entry.verified
    res, wall = timed_decode(m, x, entry, DecodeConfig(), batch_size=2)
    direct = decode(m, x[:2], preset_sampler("fast"))
    assert torch.equal(res.tokens[:2], direct.tokens) and wall > 0


def test_every_preset_says_what_it_was_chosen_on_and_names_no_task_or_estimator():
    for p in PRESETS.values():
        assert p.chosen_on
        entry = parse_spec(p.spec)
        assert "estimator" not in entry.params and entry.name != "mi-guided"
