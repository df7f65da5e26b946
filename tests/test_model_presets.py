"""Presets a model's own measurements override (``unmask.presets.MODEL_PRESETS``)."""

import pytest

from unmask import UnmaskError, Verified
from unmask.presets import MODEL_PRESETS, PRESETS, model_preset, model_preset_spec
from unmask.samplers.ramp import Ramp
from unmask.samplers.spec import parse_spec


def test_antiberty_fast_is_the_ramped_rule_and_other_models_keep_the_general_presets():
    fast = parse_spec(model_preset_spec("fast", "antiberty")).build()
    assert isinstance(fast, Verified) and fast.tolerance == 0.03
    assert isinstance(fast.inner, Ramp) and fast.inner.rate == 0.25
    for model in (None, "sudoku", "protein", object()):
        assert model_preset("fast", model) == PRESETS["fast"]
    assert model_preset("quality", "antiberty") == PRESETS["quality"]


@pytest.mark.parametrize("model, name", [(m, n) for m, own in MODEL_PRESETS.items()
                                         for n in own])
def test_every_model_preset_names_a_general_preset_and_builds(model, name):
    assert name in PRESETS
    spec = parse_spec(model_preset(name, model).spec)
    assert spec.build() is not None and model_preset(name, model).doc
    assert model_preset(name, model).chosen_on


def test_an_unknown_preset_is_refused_for_any_model():
    with pytest.raises(UnmaskError, match="preset: unknown 'quick'"):
        model_preset("quick", "antiberty")


def test_antiberty_by_its_converted_folder_gets_its_own_presets(tmp_path):
    """The same weights get the same preset by name and by folder (a copy of the converted
    folder too); a folder whose files differ from its manifest is another model."""
    from unmask.models.antiberty import write_manifest

    folder = tmp_path / "copy"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    (folder / "model.safetensors").write_bytes(b"weights")
    write_manifest(folder)
    assert model_preset("fast", str(folder)) == model_preset("fast", "antiberty")
    assert model_preset("fast", folder) != PRESETS["fast"]
    (folder / "model.safetensors").write_bytes(b"other weights")
    assert model_preset("fast", str(folder)) == PRESETS["fast"]
    assert model_preset("fast", str(tmp_path)) == PRESETS["fast"]  # no manifest
