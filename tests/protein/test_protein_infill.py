"""unmask.infill on protein models: residue templates on the shipped protein MDM (the same
decode as the protein path, every registered sampler) and on an ESM folder."""

import json
import sys
from pathlib import Path

import pytest
import torch

from unmask import UnmaskError, available_samplers, decode, infill, make_sampler
from unmask.cli import main
from unmask.infill import encode_residues
from unmask.models.auto import load_model
from unmask.protein.tokens import (
    AMINO_ACIDS,
    MASK_ID,
    PROTEIN_RESIDUES,
    decode_tokens,
    generation_inputs,
)

sys.path.insert(0, str(Path(__file__).parents[1] / "samplers"))
from test_samplers_contract import PARAMS  # noqa: E402


@pytest.fixture(scope="module")
def protein():
    torch.set_num_threads(1)
    return load_model("protein")


def test_encode_residues():
    assert encode_residues("AC<mask:2>Y[MASK]".replace("[MASK]", "<mask>"), PROTEIN_RESIDUES) == [
        0, 1, MASK_ID, MASK_ID, 19, MASK_ID]
    for bad, what in (("ACX<mask>", "'X' at position 2"), ("ac<mask>", "'a' at position 0"),
                      ("A C<mask>", "' ' at position 1")):
        with pytest.raises(UnmaskError, match=what):
            encode_residues(bad, PROTEIN_RESIDUES)


@pytest.mark.parametrize("sampler", ["confidence", "topk:k=4", "eb:gamma=0.1"])
def test_unconditional_templates_decode_as_the_protein_path(protein, sampler):
    # "<mask:L>" is the protein generation input of length L, decoded the same way
    lengths = [30, 57, 100]
    out = infill(protein, [f"<mask:{n}>" for n in lengths], sampler=sampler,
                 temperature=1.0, seed=4)
    res = decode(protein, generation_inputs(lengths, protein.max_length), sampler,
                 seed=4, config=__import__("unmask").DecodeConfig(temperature=1.0))
    assert [g.text for g in out] == decode_tokens(res.tokens)
    assert [g.nfe for g in out] == res.nfe.tolist()
    assert [len(g.text) for g in out] == lengths


@pytest.mark.parametrize("name", available_samplers())
def test_every_sampler_fills_and_keeps_the_given_residues(protein, name):
    params = PARAMS.get(name, {})
    sampler = make_sampler(name, **(params(protein) if callable(params) else params))
    template = "MKTAYIAK<mask:6>RQISFVKSHF<mask:3>QLEERLGLIE<mask>"
    (g,) = infill(protein, template, sampler=sampler, block_length=20, temperature=1.0)
    given = template.replace("<mask:6>", "??????").replace("<mask:3>", "???").replace(
        "<mask>", "?")
    assert len(g.text) == len(given)
    assert all(c in AMINO_ACIDS for c in g.text)
    assert all(a == b for a, b in zip(g.text, given, strict=True) if b != "?")
    assert g.nfe >= 1 and g.tokens_per_forward == pytest.approx(10 / g.nfe)


def test_blocks_must_fit_the_rows(protein):
    with pytest.raises(UnmaskError, match="block_length: 8 does not fit"):
        infill(protein, "<mask:10>", block_length=8)


@pytest.fixture(scope="module")
def esm_dir(tmp_path_factory):
    transformers = pytest.importorskip("transformers")
    path = tmp_path_factory.mktemp("esm")
    torch.manual_seed(0)
    cfg = transformers.EsmConfig(
        vocab_size=33, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=32, max_position_embeddings=66, pad_token_id=1, mask_token_id=32,
        position_embedding_type="rotary", token_dropout=True, emb_layer_norm_before=False)
    transformers.EsmForMaskedLM(cfg).eval().save_pretrained(str(path))
    return path


def test_esm_templates_of_any_length_batch_like_alone(esm_dir):
    esm = load_model(esm_dir)
    templates = ["MKT<mask:4>LLV", "<mask:2>AC", "GG<mask>GGGGGGGGGGGGG<mask:3>"]
    together = infill(esm, templates, sampler="topk:k=2", block_length=4)
    alone = [infill(esm, t, sampler="topk:k=2", block_length=4)[0] for t in templates]
    assert [g.text for g in together] == [g.text for g in alone]
    assert [g.nfe for g in together] == [g.nfe for g in alone]
    assert together[0].text[:3] == "MKT" and together[0].text[-3:] == "LLV"
    with pytest.raises(UnmaskError, match="exceed the model's max_length 64"):
        infill(esm, "<mask:65>")


def test_cli_on_esm_and_protein(esm_dir, capsys):
    assert main(["infill", "--model", str(esm_dir), "--template", "MKT<mask:3>LLV",
                 "--json", "--threads", "1"]) == 0
    row = json.loads(capsys.readouterr().out)
    assert row["template"] == "MKT<mask:3>LLV" and len(row["text"]) == 9
    assert main(["infill", "--model", "protein", "--template", "MKB<mask>"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: template 0: 'B'") and err.count("\n") == 1
