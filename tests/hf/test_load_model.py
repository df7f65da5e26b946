"""models.auto.load_model: path rules, task checks, and config/weights validation."""

import json
import os

import pytest
import torch

from unmask import UnmaskError
from unmask.cli import main
from unmask.models import MDMTransformer, TransformerConfig
from unmask.models.auto import load_model
from unmask.pretrained import PRETRAINED_DIR, resolve_model_path
from unmask.protein.model import ProteinMDM, protein_model_config


def tiny(tmp_path, name="m", **cfg):
    torch.manual_seed(0)
    base = dict(vocab_size=10, mask_id=9, max_length=81, d_model=16, n_layers=1, n_heads=2,
                d_ff=32, task="sudoku")
    model = MDMTransformer(TransformerConfig(**{**base, **cfg}))
    model.save_pretrained(tmp_path / name)
    return tmp_path / name


def test_bare_shipped_name_beats_a_folder_of_that_name_in_the_cwd(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    tiny(tmp_path, "sudoku", task="protein-impostor")
    assert resolve_model_path("sudoku") == PRETRAINED_DIR / "sudoku"
    assert load_model("sudoku").task == "sudoku"
    # written as a path, it is the folder
    assert resolve_model_path("./sudoku") == tmp_path.joinpath("sudoku").relative_to(tmp_path)
    assert load_model("./sudoku").task == "protein-impostor"
    assert load_model(str(tmp_path / "sudoku")).task == "protein-impostor"
    # a bare name that is not shipped may name a folder here
    tiny(tmp_path, "mine")
    assert load_model("mine").source == "mine"
    with pytest.raises(UnmaskError, match="neither a model folder nor a shipped model"):
        load_model("nope")
    with pytest.raises(UnmaskError, match="'./nope' is not a folder"):
        load_model("./nope")


def test_task_check_refuses_a_model_of_another_task_in_one_line(tmp_path):
    with pytest.raises(UnmaskError, match="^model: protein is a protein model, not a sudoku"):
        load_model("protein", task="sudoku")
    with pytest.raises(UnmaskError, match="is a arithmetic model, not a protein model"):
        load_model("arithmetic", task="protein")
    assert load_model("arithmetic", task="arithmetic").task.startswith("multiplication-")
    assert isinstance(load_model(None, task="protein"), ProteinMDM)
    notask = tiny(tmp_path, task="")
    assert load_model(notask, task="sudoku").task == ""  # no record: no refusal
    with pytest.raises(UnmaskError, match="is an MI estimator, not a model"):
        load_model("sudoku_mi_estimator")


def test_cli_refuses_a_protein_model_for_sudoku(capsys):
    puzzle = "0" * 81
    assert main(["sudoku", "solve", puzzle, "--model", "protein"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "is a protein model, not a sudoku model" in err


def _edit_config(path, fn):
    meta = json.loads((path / "config.json").read_text())
    meta = fn(meta)
    (path / "config.json").write_text(json.dumps(meta))


@pytest.mark.parametrize("edit, message", [
    (lambda m: [m], "holds a JSON list, expected an object"),
    (lambda m: {**m, "config": {k: v for k, v in m["config"].items() if k != "max_length"}},
     "missing key 'max_length'"),
    (lambda m: {**m, "config": {**m["config"], "colour": 3}}, "unknown key 'colour'"),
    (lambda m: {**m, "config": {**m["config"], "d_model": "16"}},
     "'d_model' must be of type int, got \"16\""),
    (lambda m: {**m, "config": {**m["config"], "relation_bias": 1}},
     "'relation_bias' must be of type bool"),
    (lambda m: {**m, "config": {**m["config"], "d_model": 32, "n_heads": 2}},
     "weight 'tok.weight' has shape \\(10, 16\\), the config implies \\(10, 32\\)"),
    (lambda m: {**m, "config": {**m["config"], "n_layers": 2}},
     "lacks the weight 'blocks.1.ff.0.bias'"),
    (lambda m: {**m, "config": "x"}, "'config': expected an object, got str"),
    (lambda m: {**m, "config": {**m["config"], "d_model": 15}}, "d_model: 15 is not divisible"),
])
def test_bad_config_is_one_line(tmp_path, edit, message):
    path = tiny(tmp_path)
    _edit_config(path, edit)
    with pytest.raises(UnmaskError, match=message):
        load_model(path)


@pytest.mark.parametrize("cut", [0, 10, 0.5])
def test_truncated_or_empty_weights_are_one_line(tmp_path, cut):
    path = tiny(tmp_path)
    w = path / "model.safetensors"
    data = w.read_bytes()
    w.write_bytes(data[:int(len(data) * cut) if isinstance(cut, float) else cut])
    with pytest.raises(UnmaskError, match="is not a readable safetensors file"):
        load_model(path)


def test_cli_bad_weights_exit_2_one_line(tmp_path, capsys):
    path = tiny(tmp_path)
    (path / "model.safetensors").write_bytes(b"")
    assert main(["sudoku", "solve", "0" * 81, "--model", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: model:") and "\n" not in err


def test_protein_config_loads_as_protein_model(tmp_path):
    model = ProteinMDM(protein_model_config(d_model=16, n_layers=1, n_heads=2, d_ff=32))
    model.save_pretrained(tmp_path / "p")
    loaded = load_model(os.fspath(tmp_path / "p"), task="protein")
    assert isinstance(loaded, ProteinMDM) and loaded.fingerprint() == model.fingerprint()


@pytest.mark.parametrize("name", ["sudoku", "protein", "text"])
def test_load_model_reads_config_json_once(name, monkeypatch):
    """The loader reads a folder's config.json once and hands it to the class that loads it
    (transformers' own reading of a transformers folder aside)."""
    if name == "text":
        pytest.importorskip("transformers")
    from pathlib import Path

    reads = []
    read_text = Path.read_text

    def counting(self, *a, **k):
        if self.name == "config.json":
            reads.append(self)
        return read_text(self, *a, **k)

    monkeypatch.setattr(Path, "read_text", counting)
    from unmask.models.auto import load_model

    load_model(name)
    assert len(reads) == 1, reads
