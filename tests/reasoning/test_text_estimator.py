"""The shipped MI estimator of the shipped text model: found by the model's fingerprint and
by name, small, its figures recorded beside it, and its labels' corpus reproducible."""

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from unmask.pretrained import PRETRAINED_DIR
from unmask.samplers.mi_guided import MIGuidedSampler, shipped_estimator_for

FOLDER = PRETRAINED_DIR / "text_mi_estimator"
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def text_model():
    pytest.importorskip("transformers")
    from unmask.models.auto import load_model

    return load_model("text")


@pytest.mark.parametrize("estimator", [None, "text_mi_estimator", "text"])
def test_the_text_model_finds_its_estimator(text_model, estimator):
    sampler = MIGuidedSampler(estimator=estimator)
    sampler.prepare(text_model)
    assert sampler.estimator.config.model_fingerprint == text_model.fingerprint()
    assert shipped_estimator_for(text_model) == FOLDER


def test_every_shipped_estimator_is_in_the_table():
    """The table that names shipped estimators (and the bench cache's key reads) holds every
    estimator folder the package ships."""
    from unmask.samplers.mi_guided import SHIPPED_ESTIMATORS

    shipped = {p.parent.name for p in PRETRAINED_DIR.glob("*/config.json")
               if json.loads(p.read_text()).get("model_type") == "mi-estimator"}
    assert set(SHIPPED_ESTIMATORS.values()) == shipped and "text_mi_estimator" in shipped


def test_mi_guided_generates_on_the_shipped_text_model_without_naming_an_estimator(capsys):
    from unmask.cli import main

    argv = ["generate", "--model", "text", "--prompt", "What is 12 + 30?", "--gen-length",
            "8", "--sampler", "mi-guided:gamma=0.3,free_max=true,stop_at_first_miss=true",
            "--json", "--threads", "1"]
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["text"].strip().isdigit() and 1 <= out["nfe"] <= 8
    from unmask import generate

    spec = argv[argv.index("--sampler") + 1]
    [g] = generate("text", prompts=["What is 12 + 30?"], gen_length=8, sampler=spec)
    assert (g.text, g.nfe) == (out["text"], out["nfe"])


def test_shipped_files_are_small_and_carry_their_evaluation():
    assert sum(p.stat().st_size for p in FOLDER.iterdir()) < 1_000_000
    result = json.loads((FOLDER / "eval.json").read_text())
    assert result["contexts"] >= 100 and result["pairs"] > 10_000
    assert 0 < result["spearman"] <= 1 and result["cost"]["fraction"] < 0.1


def test_the_labels_corpus_is_what_make_corpus_writes(tmp_path):
    """The labels were cut from experiments/text_mi_estimator/make_corpus.py's output (training
    pools only): rewriting it gives the sha256 the estimator records."""
    pytest.importorskip("reasoning_gym")
    out = tmp_path / "corpus.txt"
    subprocess.run([sys.executable, str(ROOT / "experiments/text_mi_estimator/make_corpus.py"),
                    str(out)], check=True, env={"PYTHONPATH": str(ROOT / "src")})
    meta = json.loads((FOLDER / "config.json").read_text())
    want = meta["labels"]["identity"]["options"]["text_sha256"]
    assert hashlib.sha256(out.read_bytes()).hexdigest() == want
