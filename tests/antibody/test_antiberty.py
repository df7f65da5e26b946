"""``antiberty`` as a model name: the wheel's pickle converted once into a safetensors
BertForMaskedLM folder in the user's cache, checked by its sha256, loaded as any HF masked LM
with a residue tokenizer."""

import json
import shutil

import pytest
import torch

from unmask.cli import main
from unmask.errors import UnmaskError
from unmask.models import antiberty
from unmask.models.auto import load_model

pytest.importorskip("transformers")
pytest.importorskip("antiberty")

#: IGHV1-18*01, a human heavy V gene (germline; framework 1 to the start of CDR3)
IGHV1_18 = ("QVQLVQSGAEVKKPGASVKVSCKASGYTFTSYGISWVRQAPGQGLEWMGWISAYNGNTNYAQKLQGRVTMTTDTSTS"
            "TAYMELRSLRSDDTAVYYCAR")


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    """A fresh cache folder for the module: the first load converts into it."""
    root = tmp_path_factory.mktemp("cache")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(antiberty.CACHE_ENV, str(root))
        yield root


@pytest.fixture(scope="module")
def model(cache):
    torch.set_num_threads(1)
    return load_model("antiberty")


def test_conversion_writes_one_safetensors_folder_without_the_heads(model, cache):
    (folder,) = [p for p in cache.iterdir()]  # the temporary folder is gone
    assert folder.name == f"antiberty-0.1.3-{antiberty.WEIGHTS_SHA256[:12]}"
    assert sorted(p.name for p in folder.iterdir()) == [
        "config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json",
        antiberty.MANIFEST]
    from safetensors import safe_open

    with safe_open(str(folder / "model.safetensors"), "pt") as f:
        keys = set(f.keys())
    assert not [k for k in keys if k.startswith(("cls.species", "cls.chain", "cls.graft"))]
    assert "bert.embeddings.word_embeddings.weight" in keys
    config = json.loads((folder / "config.json").read_text())
    assert config["architectures"] == ["BertForMaskedLM"]
    shape = (config["num_hidden_layers"], config["hidden_size"], config["vocab_size"])
    assert shape == (8, 512, 25)
    # the weights are the wheel's, tensor for tensor
    wheel = torch.load(antiberty.wheel_files() / "AntiBERTy_md_smooth" / "pytorch_model.bin",
                       map_location="cpu", weights_only=True)
    state = model.hf.state_dict()
    for name in ("bert.embeddings.word_embeddings.weight", "cls.predictions.decoder.weight",
                 "bert.encoder.layer.7.output.dense.weight", "cls.predictions.bias"):
        assert torch.equal(state[name], wheel[name]), name


def test_residue_strings_without_spaces(model):
    tok = model.tokenizer
    ids = tok("EVQL[MASK]ES")["input_ids"]
    assert tok.convert_ids_to_tokens(ids) == ["[CLS]", "E", "V", "Q", "L", "[MASK]", "E", "S",
                                              "[SEP]"]
    assert tok.decode(ids, skip_special_tokens=True) == "EVQLES"
    assert model.mask_id == tok.mask_token_id == 4
    # samplers emit the 20 residues only
    assert sorted(tok.convert_ids_to_tokens(list(model.real_token_ids))) == sorted(
        "ACDEFGHIKLMNPQRSTVWY")


def test_second_load_reuses_the_folder(model, cache, monkeypatch):
    monkeypatch.setattr(antiberty, "_write_folder", lambda *a: pytest.fail("converted twice"))
    assert load_model("antiberty").source == model.source


def _single_position_recovery(model, seq: str) -> torch.Tensor:
    """(L,) bool: each residue of ``seq`` recovered by the argmax with only it masked."""
    ids = torch.tensor(model.tokenizer(seq)["input_ids"])
    n = len(seq)
    x = ids.repeat(n, 1)
    x[torch.arange(n), torch.arange(n) + 1] = model.mask_id
    with torch.no_grad():
        logits = model(x).logits[torch.arange(n), torch.arange(n) + 1]
    return logits.argmax(-1) == ids[1:-1]


def test_recovers_a_human_heavy_v_gene_and_not_a_shuffled_one(model):
    # a trained antibody model recovers almost every residue of a germline VH from its
    # context; on the same residues in a random order the context is no help
    assert _single_position_recovery(model, IGHV1_18).float().mean() >= 0.9
    g = torch.Generator().manual_seed(0)
    shuffled = "".join(IGHV1_18[i] for i in torch.randperm(len(IGHV1_18), generator=g))
    assert _single_position_recovery(model, shuffled[:48]).float().mean() <= 0.4


def test_a_wrong_sha256_is_one_line_and_writes_nothing(tmp_path, monkeypatch, capsys):
    source = tmp_path / "trained_models"
    shutil.copytree(antiberty.wheel_files(), source,
                    ignore=shutil.ignore_patterns("pytorch_model.bin", "*.bin"))
    (source / "AntiBERTy_md_smooth" / "pytorch_model.bin").write_bytes(b"not the weights")
    cache = tmp_path / "cache"
    monkeypatch.setenv(antiberty.CACHE_ENV, str(cache))
    with pytest.raises(UnmaskError, match="sha256 .* not antiberty==0.1.3's"):
        antiberty.antiberty_folder(source)
    assert not cache.exists() or not any(cache.iterdir())
    monkeypatch.setattr(antiberty, "wheel_files", lambda: source)
    assert main(["generate", "--model", "antiberty", "--prompt", "EVQL", "--gen-length",
                 "4"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: model:") and "sha256" in err and err.count("\n") == 1


def test_a_failed_conversion_leaves_no_folder(tmp_path, monkeypatch):
    monkeypatch.setenv(antiberty.CACHE_ENV, str(tmp_path))

    def broken(source, weights, out):
        (out / "config.json").write_text("{}")
        raise KeyboardInterrupt

    monkeypatch.setattr(antiberty, "_write_folder", broken)
    with pytest.raises(KeyboardInterrupt):
        antiberty.antiberty_folder()
    assert list(tmp_path.iterdir()) == []


def test_cache_dir_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.delenv(antiberty.CACHE_ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert antiberty.cache_dir() == tmp_path / "xdg" / "unmask"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert antiberty.cache_dir() == tmp_path / "home" / ".cache" / "unmask"
    monkeypatch.setenv(antiberty.CACHE_ENV, str(tmp_path / "mine"))
    assert antiberty.cache_dir() == tmp_path / "mine"


def test_infilling_the_cdrs_of_a_germline_heavy_chain(model):
    from unmask import infill

    # IMGT CDR1 (27-38) and CDR2 (56-65) of IGHV1-18 hold GYTFTSYG and ISAYNGNT
    cdr1, cdr2 = IGHV1_18.index("GYTFTSYG"), IGHV1_18.index("ISAYNGNT")
    template = (IGHV1_18[:cdr1] + "<mask:8>" + IGHV1_18[cdr1 + 8:cdr2] + "<mask:8>"
                + IGHV1_18[cdr2 + 8:])
    for sampler in ("confidence", "topk:k=4"):
        (g,) = infill(model, template, sampler=sampler)
        assert len(g.text) == len(IGHV1_18)
        hidden = set(range(cdr1, cdr1 + 8)) | set(range(cdr2, cdr2 + 8))
        assert all(a == b for i, (a, b) in enumerate(zip(g.text, IGHV1_18, strict=True))
                   if i not in hidden)
        recovered = sum(g.text[i] == IGHV1_18[i] for i in hidden)
        assert recovered >= 13, (sampler, g.text)  # of 16; a uniform guess gets ~1
        assert g.nfe == (16 if sampler == "confidence" else 4)


def test_generate_and_infill_read_plain_residue_strings(cache, capsys):
    assert main(["infill", "--model", "antiberty", "--template", "EVQLVESGG<mask:3>VQPGG",
                 "--json", "--threads", "1"]) == 0
    row = json.loads(capsys.readouterr().out)
    assert row["text"].startswith("EVQLVESGG") and row["text"].endswith("VQPGG")
    assert len(row["text"]) == 17
    assert main(["generate", "--model", "antiberty", "--prompt", "EVQLVESGGGLVQPGG",
                 "--gen-length", "8", "--json", "--threads", "1"]) == 0
    row = json.loads(capsys.readouterr().out)
    assert len(row["text"]) == 8 and set(row["text"]) <= set("ACDEFGHIKLMNPQRSTVWY")


def test_the_bench_names_the_model_and_runs_a_setting_once(cache, tmp_path, capsys):
    out = tmp_path / "b.json"
    assert main(["antibody", "bench", "--limit", "2", "--samplers", "topk:k=8", "--settings",
                 "cdr", "cdr", "--no-perplexity", "--threads", "1", "--json", str(out)]) == 0
    data = json.loads(out.read_text())
    assert data["model"] == "antiberty"  # not the cache folder of this machine
    assert data["settings"] == ["cdr"] and len(data["rows"]) == 1
