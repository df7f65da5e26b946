"""The shipped MI estimator for AntiBERTy: found by name and by the model's fingerprint,
and its figures recorded beside it."""

import json

import pytest
import torch

from unmask.errors import UnmaskError
from unmask.models.base import MaskedModel, ModelOutput
from unmask.pretrained import PRETRAINED_DIR
from unmask.samplers.mi_guided import MIGuidedSampler, shipped_estimator_for

FOLDER = PRETRAINED_DIR / "antiberty_mi_estimator"


class _Tiny(MaskedModel):
    def __init__(self):
        super().__init__()
        self.vocab_size, self.mask_id, self.max_length, self.hidden_size = 6, 5, 8, 4
        self.real_token_ids = (0, 1, 2, 3, 4)
        self.emb = torch.nn.Embedding(6, 4)

    def forward(self, tokens, output_hidden_layers=False):
        h = self.emb(tokens)
        return ModelOutput(logits=h @ self.emb.weight.T, hidden=h)


def test_a_model_without_a_shipped_estimator_is_told_to_pass_one():
    with pytest.raises(UnmaskError, match="no shipped MI estimator for this model"):
        shipped_estimator_for(_Tiny())
    with pytest.raises(UnmaskError, match="no shipped MI estimator"):
        MIGuidedSampler().prepare(_Tiny())


def test_shipped_files_are_small_and_carry_their_evaluation():
    sizes = sum(p.stat().st_size for p in FOLDER.iterdir())
    assert sizes < 2_000_000
    result = json.loads((FOLDER / "eval.json").read_text())
    assert result["contexts"] >= 1 and result["pairs"] > 1000  # held-out contexts
    assert -1 <= result["spearman"] <= 1 and 0 < result["probe"]["ceiling"]["spearman"] <= 1


def test_labels_came_from_the_training_split_only():
    """The estimator's labels were cut from training_corpus(train chains): its sha256 is
    recorded, and the held-out chains are not in that corpus (anarci's table as of 2026.2)."""
    pytest.importorskip("anarci")
    import hashlib

    from unmask.antibody import load_heavy_chains, training_corpus

    meta = json.loads((FOLDER / "config.json").read_text())
    options = meta["labels"]["identity"]["options"]
    text = training_corpus(load_heavy_chains("train"))
    assert hashlib.sha256(text.encode()).hexdigest() == options["text_sha256"]
    assert not any(c.sequence in text for c in load_heavy_chains("held_out"))


@pytest.fixture(scope="module")
def antiberty():
    pytest.importorskip("transformers")
    pytest.importorskip("antiberty")
    from unmask.models.auto import load_model

    torch.set_num_threads(1)
    return load_model("antiberty")


@pytest.mark.parametrize("estimator", [None, "antiberty", "antiberty_mi_estimator"])
def test_antiberty_finds_its_estimator(antiberty, estimator):
    sampler = MIGuidedSampler(estimator=estimator)
    sampler.prepare(antiberty)
    assert sampler.estimator.config.model_fingerprint == antiberty.fingerprint()
    assert shipped_estimator_for(antiberty) == FOLDER
