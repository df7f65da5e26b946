"""`unmask mi fit`: labels, estimator and evaluation for a text masked LM in one command,
writing a folder mi-guided reads."""

import json

import pytest
import torch

from unmask import infill
from unmask.cli import main
from unmask.metrics import held_out_mask
from unmask.mi.estimator import load_estimator
from unmask.models.auto import load_model

CORPUS = "the cat sat on the mat . the dog ran . a big red sun and the moon . hello world . " * 8


def test_fit_writes_an_estimator_mi_guided_reads(bert_dir, tmp_path, capsys):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(CORPUS)
    out = tmp_path / "est"
    argv = ["mi", "fit", "--model", str(bert_dir), "--corpus", str(corpus), "--out", str(out),
            "--length", "12", "--contexts", "40", "--shard-size", "20", "--label-s", "1000",
            "--train-s", "5", "--top-k", "4", "--threads", "1"]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert f"mi-guided:estimator={out}" in printed and "Spearman" in printed
    manifest = json.loads((out / "labels" / "manifest.json").read_text())
    assert manifest["contexts"] == 40 and len(manifest["shards"]) == 2
    assert manifest["identity"]["top_k"] == 4
    report = json.loads((out / "eval.json").read_text())
    assert report["budget"]["contexts"] == 40 and report["budget"]["train_s"] <= 5 + 5
    # scored on the contexts the training held out
    assert report["contexts"] == int(held_out_mask(torch.arange(40), 0.1, 0).sum()) > 0
    assert -1 <= report["spearman"] <= 1 and "ceiling" in report["probe"]
    model = load_model(bert_dir)
    est = load_estimator(out, model)  # tied to this model's fingerprint
    assert est.config.hidden_size == model.hidden_size
    (g,) = infill(model, "the <mask:3> sat on the mat", sampler=f"mi-guided:estimator={out}")
    assert g.nfe >= 1 and model.mask_id not in g.token_ids
    # a second run reuses the labels (resumable) and retrains
    assert main(argv) == 0
    assert "labels: 40 contexts" in capsys.readouterr().out


@pytest.mark.parametrize("argv,message", [
    ([], "--corpus: a text model needs a corpus"),
    (["--model", "protein", "--corpus", "x.txt"], "--corpus: only text models"),
    (["--mask-ratio", "0.9:0.1"], "--mask-ratio"),
])
def test_fit_refusals_are_one_line(bert_dir, tmp_path, capsys, argv, message):
    base = ["mi", "fit", "--model", str(bert_dir), "--out", str(tmp_path / "o")]
    assert main(base + argv) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
    assert not (tmp_path / "o").exists()
