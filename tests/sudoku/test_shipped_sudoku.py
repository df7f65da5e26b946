"""The shipped Sudoku MDM (and its MI estimator) load with no download and do their job."""

import json

import numpy as np
import pytest
import torch

from unmask import UnmaskError, decode, make_sampler
from unmask.cli import main
from unmask.models.auto import load_model
from unmask.sudoku import grid_to_tokens, is_valid_solution, tokens_to_grid
from unmask.sudoku.datasets import load_set


@pytest.fixture(scope="module")
def model():
    return load_model("sudoku")


def test_shipped_model_is_the_documented_architecture(model):
    assert model.config.task == "sudoku" and model.config.relation_bias
    assert sum(p.numel() for p in model.parameters()) < 3_000_000


def test_shipped_model_solves_easy_puzzles(model):
    # solutions with 10 cells blanked: every blank is a naked single
    _, solutions = load_set("medium")
    rng = np.random.default_rng(0)
    puzzles = solutions[:20].copy()
    for row in puzzles:
        row[rng.choice(81, 10, replace=False)] = 0
    res = decode(model, grid_to_tokens(puzzles), make_sampler("confidence"))
    assert is_valid_solution(tokens_to_grid(res.tokens), puzzles).all()
    assert (res.nfe == 10).all()


def test_shipped_estimator_belongs_to_the_shipped_model(model):
    from unmask.mi.estimator import load_estimator

    est = load_estimator(None, model)
    x = grid_to_tokens(load_set("hard")[0][:2])
    with torch.inference_mode():
        out = model(x)
        mi = est(out.hidden, x == model.mask_id)
    assert mi.shape == (2, 81, 81) and (mi >= 0).all()
    assert torch.allclose(mi, mi.transpose(1, 2))


@pytest.mark.slow
def test_bench_on_a_hard_slice(tmp_path, capsys):
    out = tmp_path / "bench.json"
    assert main(["sudoku", "bench", "--limit", "20", "--quiet", "--samplers", "confidence",
                 "topk:k=7", "eb:gamma=0.1,order=confidence",
                 "mi-guided:gamma=0.3,order=confidence",
                 "mi-guided:gamma=1.0,order=confidence+verify=0.01", "--json", str(out)]) == 0
    data = json.loads(out.read_text())
    from unmask.mi.estimator import load_estimator

    assert data["estimator"] == {"source": "shipped 'sudoku_mi_estimator'",
                                 "fingerprint": load_estimator().fingerprint()}
    rows = {r["label"]: r for r in data["rows"]}
    seq = rows["confidence"]
    assert seq["solved"] >= 0.2  # the shipped model is well above this on hard puzzles
    assert rows["topk k=7"]["nfe"] < seq["nfe"] / 5
    assert rows["mi-guided gamma=0.3 order=confidence"]["nfe"] < seq["nfe"]
    verified = rows["mi-guided gamma=1.0 order=confidence +verify=0.01"]
    assert verified["verified"] and verified["nfe"] < seq["nfe"] / 4
    assert verified["solved"] >= seq["solved"] - 0.1  # within two of the 20 puzzles
    assert (f"MI estimator: shipped 'sudoku_mi_estimator' (weights "
            f"{data['estimator']['fingerprint']})") in capsys.readouterr().out


@pytest.mark.slow
def test_demo_runs(capsys):
    assert main(["demo", "--puzzles", "10"]) == 0
    assert "solved %" in capsys.readouterr().out


def test_verified_at_tolerance_zero_is_sequential_decoding(model):
    from unmask import Verified

    x = grid_to_tokens(load_set("hard")[0][:2])
    seq = decode(model, x, "confidence")
    exact = decode(model, x, Verified(make_sampler("eb", gamma=1.0, order="confidence"),
                                      tolerance=0.0))
    assert torch.equal(exact.tokens, seq.tokens)
    assert (exact.nfe < seq.nfe).all()


def test_tables_name_a_shipped_model_by_its_name(model, tmp_path):
    from unmask.pretrained import describe_source

    assert describe_source(model.source) == "shipped 'sudoku'"
    assert describe_source(tmp_path) == str(tmp_path)


def test_shipped_corrector_belongs_to_the_shipped_model_and_repairs_boards(model):
    """Hard puzzles 0, 74 and 113: EB gamma=0.3 fails them; with the shipped corrector
    (threshold 0.3) the loop takes the wrong digits back and solves them (all 1,000:
    24 boards repaired, none lost)."""
    from unmask.corrector import load_corrector
    from unmask.hooks import corrector_hooks

    corrector = load_corrector(None, model)
    puzzles, _ = load_set("hard")
    puzzles = puzzles[[0, 74, 113]]
    x = grid_to_tokens(puzzles)
    eb = make_sampler("eb", gamma=0.3, order="confidence")
    plain = decode(model, x, eb)
    fixed = decode(model, x, eb, hooks=corrector_hooks(corrector, threshold=0.3))
    assert not is_valid_solution(tokens_to_grid(plain.tokens), puzzles).any()
    assert is_valid_solution(tokens_to_grid(fixed.tokens), puzzles).all()
    assert (fixed.stats["remasked"] > 0).all() and (fixed.nfe > plain.nfe).all()
    other = load_model("sudoku")
    with torch.no_grad():
        other.head.bias.add_(0.01)
    with pytest.raises(UnmaskError, match="fingerprint"):
        load_corrector(None, other)
