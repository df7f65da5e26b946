"""The EsmForMaskedLM adapter, on a tiny randomly initialised checkpoint written here."""

import numpy as np
import pytest
import torch

from unmask import UnmaskError
from unmask.decode import decode
from unmask.models.base import ResidueAlphabet
from unmask.protein.model import load_protein_model
from unmask.protein.tokens import (
    AMINO_ACIDS,
    MASK_ID,
    PAD_ID,
    PROTEIN_RESIDUES,
    encode,
    generation_inputs,
)

transformers = pytest.importorskip("transformers")
from unmask.models.esm import ESM2_ALPHABET, EsmMaskedModel  # noqa: E402

# ESM's alphabet in a shuffled order: the adapter must read ids from vocab.txt, not assume them
VOCAB = list(np.random.default_rng(0).permutation(ESM2_ALPHABET))


def write_checkpoint(path, vocab=VOCAB, layers=2):
    torch.manual_seed(0)
    cfg = transformers.EsmConfig(
        vocab_size=len(vocab), hidden_size=16, num_hidden_layers=layers, num_attention_heads=2,
        intermediate_size=32, max_position_embeddings=66, pad_token_id=vocab.index("<pad>"),
        mask_token_id=vocab.index("<mask>"), position_embedding_type="rotary",
        token_dropout=True, emb_layer_norm_before=False)
    model = transformers.EsmForMaskedLM(cfg).eval()
    model.save_pretrained(str(path))
    (path / "vocab.txt").write_text("\n".join(vocab) + "\n")
    return model


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    path = tmp_path_factory.mktemp("esm")
    return path, write_checkpoint(path)


def direct_logits(esm, residues_with_mask: str):
    """ESM run by hand on <cls> seq <eos>, '?' standing for <mask>; (L, 33) logits."""
    ids = [VOCAB.index("<cls>")] + [VOCAB.index("<mask>" if c == "?" else c)
                                    for c in residues_with_mask] + [VOCAB.index("<eos>")]
    with torch.no_grad():
        return esm(input_ids=torch.tensor([ids])).logits[0, 1:-1]


def test_logits_match_esm_run_by_hand_and_padding_changes_nothing(checkpoint):
    path, esm = checkpoint
    model = EsmMaskedModel.from_pretrained(path, residues=PROTEIN_RESIDUES)
    assert model.max_length == 64 and model.hidden_size == 16
    seq = "MKVLA?DE??W"
    x = generation_inputs(np.array([len(seq)]), model.max_length)
    x[0, :len(seq)] = torch.tensor([MASK_ID if c == "?" else int(encode(c)[0]) for c in seq])
    out = model(x, output_hidden_layers=True)
    ref = direct_logits(esm, seq)
    cols = [VOCAB.index(a) for a in AMINO_ACIDS] + [VOCAB.index("<mask>"), VOCAB.index("<pad>")]
    assert torch.allclose(out.logits[0, :len(seq)], ref[:, cols], atol=1e-5)
    # the same protein without any PAD (a row of exactly its length) gives the same logits
    alone = model(x[:, :len(seq)])
    assert torch.allclose(alone.logits[0], out.logits[0, :len(seq)], atol=1e-5)
    assert torch.allclose(alone.hidden[0], out.hidden[0, :len(seq)], atol=1e-5)
    assert out.hidden.shape == (1, 64, 16) and len(out.hidden_layers) == 3


def test_decoding_with_esm_fills_the_given_lengths(checkpoint):
    path, _ = checkpoint
    model = load_protein_model(path)
    assert isinstance(model, EsmMaskedModel)
    lengths = np.array([5, 30, 64])
    res = decode(model, generation_inputs(lengths, model.max_length), "confidence")
    assert res.nfe.tolist() == lengths.tolist()
    assert (res.tokens != PAD_ID).sum(1).tolist() == lengths.tolist()
    assert bool((res.tokens[res.tokens != PAD_ID] < 20).all())
    with pytest.raises(UnmaskError, match="exceeds the model's max_length 64"):
        decode(model, generation_inputs(np.array([5]), 70), "topk")


def test_default_alphabet_and_bad_checkpoints(tmp_path):
    write_checkpoint(tmp_path / "plain", vocab=list(ESM2_ALPHABET), layers=1)
    (tmp_path / "plain" / "vocab.txt").unlink()
    model = EsmMaskedModel.from_pretrained(tmp_path / "plain", residues=PROTEIN_RESIDUES)
    assert model.to_esm.tolist()[:2] == [ESM2_ALPHABET.index("A"), ESM2_ALPHABET.index("C")]
    no_w = [t if t != "W" else "<null_2>" for t in ESM2_ALPHABET]
    write_checkpoint(tmp_path / "now", vocab=no_w, layers=1)
    with pytest.raises(UnmaskError, match="vocab: the checkpoint's vocabulary has no 'W'"):
        EsmMaskedModel.from_pretrained(tmp_path / "now", residues=PROTEIN_RESIDUES)
    (tmp_path / "now" / "vocab.txt").write_text("A\nC\n")
    with pytest.raises(UnmaskError, match="vocab: 2 tokens but the model's vocab_size is 33"):
        EsmMaskedModel.from_pretrained(tmp_path / "now", residues=PROTEIN_RESIDUES)
    with pytest.raises(UnmaskError, match="has no config.json"):
        EsmMaskedModel.from_pretrained(tmp_path, residues=PROTEIN_RESIDUES)


def test_the_adapter_speaks_the_residues_it_is_given(checkpoint):
    """The ESM adapter lives in the model layer and knows no task: given another alphabet
    it reads and scores that one (ids: its letters, then MASK and PAD)."""
    path, esm = checkpoint
    four = ResidueAlphabet("ACDE", 4, 5)
    model = EsmMaskedModel.from_pretrained(path, residues=four, task="four")
    assert (model.vocab_size, model.mask_id, model.real_token_ids) == (6, 4, (0, 1, 2, 3))
    assert model.task == "four" and model.residues is four
    x = torch.tensor([[0, 4, 3, 5, 5]])  # A ? E, then PAD
    ref = direct_logits(esm, "A?E")
    cols = [VOCAB.index(a) for a in "ACDE"] + [VOCAB.index("<mask>"), VOCAB.index("<pad>")]
    assert torch.allclose(model(x).logits[0, :3], ref[:, cols], atol=1e-5)
