"""HFMaskedModel on tiny random checkpoints written by transformers itself (offline)."""

import json
import shutil

import numpy as np
import pytest
import torch
import transformers

from unmask import UnmaskError, decode
from unmask.models.auto import load_model
from unmask.models.esm import EsmMaskedModel
from unmask.models.hf import HFMaskedModel
from unmask.protein.model import load_protein_model
from unmask.protein.tokens import AMINO_ACIDS, PAD_ID, generation_inputs


def test_bert_logits_vocabulary_and_hidden_layers(bert_dir):
    model = load_model(bert_dir)
    assert isinstance(model, HFMaskedModel) and model.task == "text"
    tok = model.tokenizer
    assert model.mask_id == tok.mask_token_id == 4 and model.max_length == 64
    assert set(model.real_token_ids).isdisjoint(tok.all_special_ids)
    assert len(model.real_token_ids) == len(tok) - len(tok.all_special_ids)
    ids = torch.tensor([tok("the cat sat on the mat").input_ids])
    ids[0, 2:4] = model.mask_id
    ref = transformers.BertForMaskedLM.from_pretrained(str(bert_dir)).eval()
    with torch.no_grad():
        want = ref(input_ids=ids, output_hidden_states=True)
        out = model(ids, output_hidden_layers=True)
    assert torch.allclose(out.logits, want.logits, atol=1e-6)
    assert torch.allclose(out.hidden, want.hidden_states[-1], atol=1e-6)
    assert len(out.hidden_layers) == 3
    second = load_model(bert_dir, hidden_layer=1)
    with torch.no_grad():
        assert torch.allclose(second(ids).hidden, want.hidden_states[1], atol=1e-6)


def test_left_padding_changes_no_logit(bert_dir, llada_dir):
    for model in (load_model(bert_dir), load_model(llada_dir, trust_remote_code=True)):
        ids = torch.tensor([[model.real_token_ids[3], model.real_token_ids[5], model.mask_id,
                             model.mask_id]])
        padded = torch.cat([torch.full((1, 3), model.pad_id), ids], 1)
        with torch.no_grad():
            a, b = model(ids).logits[0], model(padded).logits[0, 3:]
        assert torch.allclose(a, b, atol=1e-5)


def test_decode_emits_only_real_tokens(bert_dir):
    model = load_model(bert_dir)
    x = torch.full((3, 10), model.mask_id)
    x[:, 0] = model.tokenizer.cls_token_id  # given context may be a special token
    res = decode(model, x, "confidence", seed=0)
    assert res.nfe.tolist() == [9, 9, 9]
    assert bool(model.real_token_mask[res.tokens[:, 1:]].all())


def test_dtype_bf16(bert_dir):
    model = load_model(bert_dir, dtype="bfloat16")
    assert next(model.hf.parameters()).dtype == torch.bfloat16
    out = model(torch.full((1, 5), model.mask_id))
    assert out.logits.dtype == torch.float32
    with pytest.raises(UnmaskError, match="dtype: expected one of"):
        load_model(bert_dir, dtype="int8")


def test_remote_code_runs_only_from_the_folder_and_only_when_allowed(llada_dir, tmp_path):
    with pytest.raises(UnmaskError, match="runs its own modelling code .*--trust-remote-code"):
        load_model(llada_dir)
    model = load_model(llada_dir, trust_remote_code=True)
    assert model.mask_id == 3 and model.eos_ids == (2,) and model.pad_id == 0
    assert 2 in model.real_token_ids and not {0, 1, 3} & set(model.real_token_ids)
    res = decode(model, torch.tensor([[1, 4, 5] + [3] * 5]), "confidence")
    assert res.nfe.tolist() == [5]
    # the code file is gone: refused before anything runs
    gone = tmp_path / "gone"
    shutil.copytree(llada_dir, gone)
    (gone / "modeling_tinyllada.py").unlink()
    with pytest.raises(UnmaskError, match="names code modeling_tinyllada.py that is not in"):
        load_model(gone, trust_remote_code=True)
    # code that would be fetched from another repository
    elsewhere = tmp_path / "elsewhere"
    shutil.copytree(llada_dir, elsewhere)
    meta = json.loads((elsewhere / "config.json").read_text())
    meta["auto_map"]["AutoModel"] = "someone/repo--modeling_x.Model"
    (elsewhere / "config.json").write_text(json.dumps(meta))
    with pytest.raises(UnmaskError, match="auto_map.*points outside the folder"):
        load_model(elsewhere, trust_remote_code=True)


def test_bad_folders_are_one_line(bert_dir, tmp_path):
    import tiny_models

    nowt = tmp_path / "nowt"
    shutil.copytree(bert_dir, nowt)
    (nowt / "model.safetensors").unlink()
    with pytest.raises(UnmaskError, match="has no weights"):
        load_model(nowt)
    nomask = tiny_models.write_llada(tmp_path / "nomask", mask=False, layers=1)
    with pytest.raises(UnmaskError, match="has no mask token"):
        load_model(nomask, trust_remote_code=True)
    broken = tmp_path / "broken"
    shutil.copytree(bert_dir, broken)
    (broken / "model.safetensors").write_bytes(b"\0" * 7)
    with pytest.raises(UnmaskError, match="is not a readable masked LM"):
        load_model(broken)
    with pytest.raises(UnmaskError, match="is a text model, not a sudoku model"):
        load_model(bert_dir, task="sudoku")
    # a config that disagrees with its weights, or holds a wrong type, is one line
    meta = json.loads((bert_dir / "config.json").read_text())
    # (transformers 5 refuses the wrong type in the config, 4.x when it builds the model)
    for key, value, message in [("hidden_size", "16", "is not a (transformers config|"
                                                      "readable masked LM)"),
                                ("num_hidden_layers", 3, "weights lack 'bert.encoder.layer.2"),
                                ("vocab_size", 99, r"have shape \(21, 16\), but its config.json "
                                 r"implies \(99, 16\)")]:
        bad = tmp_path / f"bad_{key}"
        shutil.copytree(bert_dir, bad)
        (bad / "config.json").write_text(json.dumps({**meta, key: value}))
        with pytest.raises(UnmaskError, match=message):
            load_model(bad)


def test_esmc_folder_is_a_protein_model(tmp_path):
    import tiny_models

    path = tiny_models.write_esmc(tmp_path / "esmc")
    model = load_protein_model(path)
    assert isinstance(model, EsmMaskedModel) and model.max_length == 64
    seq = "MKVLAW"
    x = generation_inputs(np.array([len(seq)]), 12)
    x[0, :len(seq)] = torch.tensor([AMINO_ACIDS.index(c) for c in seq])
    esmc = transformers.EsmcForMaskedLM.from_pretrained(str(path)).eval()
    ids = [0] + [4 + "LAGVSERTIDPKQNFYMHWC".index(c) for c in seq] + [2]
    with torch.no_grad():
        ref = esmc(input_ids=torch.tensor([ids]), output_hidden_states=True)
        out = model(x, output_hidden_layers=True)
    assert out.hidden.shape == (1, 12, 16) and len(out.hidden_layers) == 3
    assert torch.allclose(out.hidden[0, :len(seq)], ref.hidden_states[-1][0, 1:-1], atol=1e-5)
    ref = ref.logits[0, 1:-1]
    cols = [4 + "LAGVSERTIDPKQNFYMHWC".index(a) for a in AMINO_ACIDS]
    assert torch.allclose(out.logits[0, :len(seq), :20], ref[:, cols], atol=1e-5)
    res = decode(model, generation_inputs(np.array([5, 12]), 12), "confidence")
    assert (res.tokens != PAD_ID).sum(1).tolist() == [5, 12]
    with pytest.raises(UnmaskError, match="is a protein model, not a text model"):
        load_model(path, task="text")


def test_every_sampler_and_the_probe_run_on_hf_models(bert_dir, llada_dir):
    from unmask import available_samplers
    from unmask.mi.probe import perturbation_mi
    from unmask.samplers.base import sampler_class

    llada = load_model(llada_dir, trust_remote_code=True)
    x = torch.full((2, 6), llada.mask_id)
    x[:, 0] = llada.real_token_ids[2]
    for name in available_samplers():
        if name in ("mi-guided", "demask"):  # need an estimator trained for this model
            continue
        if sampler_class(name).needs_attentions and not llada.supports_attentions:
            with pytest.raises(UnmaskError, match="attention"):
                decode(llada, x, name, seed=1)
            continue
        res = decode(llada, x, name, seed=1)
        assert bool(llada.real_token_mask[res.tokens[:, 1:]].all()), name
    for model in (load_model(bert_dir), llada):
        x = torch.full((2, 6), model.mask_id)
        x[:, 0] = model.real_token_ids[2]
        probe = perturbation_mi(model, x, batch_size=64)
        v = len(model.real_token_ids)
        assert probe.sequences == 2 * (1 + 5 * v)  # every real token at every masked slot
        assert probe.mi.shape == (2, 6, 6) and bool((probe.mi >= 0).all())
