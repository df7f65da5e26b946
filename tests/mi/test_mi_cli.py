"""Structure score, map drawing and the three commands end to end on a tiny Sudoku MDM."""

import json

import pytest
import torch

from unmask import UnmaskError
from unmask.cli import main
from unmask.mi.labels import write_labels
from unmask.models import MDMTransformer
from unmask.sudoku.datasets import load_set
from unmask.sudoku.maps import parse_cell, peer_mask, plot_mi_maps, structure_score
from unmask.sudoku.parse import to_string
from unmask.sudoku.train import sudoku_model_config


def test_peers_are_twenty_per_cell():
    peers = peer_mask()
    assert peers.sum(1).tolist() == [20] * 81 and torch.equal(peers, peers.T)
    assert peers[0, 1] and peers[0, 9] and peers[0, 20] and not peers[0, 21]  # r3c3 in box 1
    assert not peers.diagonal().any()


def test_structure_score_exact_values():
    everything = torch.ones(81, dtype=torch.bool)
    uniform = torch.ones(81, 81) - torch.eye(81)
    s = structure_score(uniform, everything)
    assert s["pairs"] == 3240 and s["chance_share"] == pytest.approx(0.25)
    assert s["mass_share"] == pytest.approx(0.25)
    rules = peer_mask().double() * 0.5
    s = structure_score(rules, everything)
    assert s["mass_share"] == pytest.approx(1.0) and s["top_share"] == pytest.approx(1.0)
    # 3 times the MI on peers: 3 * 810 / (3 * 810 + 2430)
    s = structure_score(uniform + 2 * peer_mask().double(), everything)
    assert s["mass_share"] == pytest.approx(0.5)
    # only row 1 masked: every pair is a peer pair
    row1 = torch.zeros(81, dtype=torch.bool)
    row1[:9] = True
    assert structure_score(uniform, row1)["chance_share"] == 1.0


def test_parse_cell():
    assert parse_cell("1,1") == 0 and parse_cell("9,9") == 80 and parse_cell("2,3") == 11
    for bad in ("0,1", "10,1", "a,b", "5"):
        with pytest.raises(UnmaskError, match="--cell"):
            parse_cell(bad)


def test_plot_writes_an_image_and_returns_scores(tmp_path):
    puzzle, _ = load_set("hard")
    grid = puzzle[0]
    rules = peer_mask().double() * torch.from_numpy(grid == 0).double()[:, None]
    rules = rules * torch.from_numpy(grid == 0).double()[None]
    scores = plot_mi_maps(grid, {"a": rules, "b": rules.T * 2}, int((grid == 0).argmax()),
                          tmp_path / "m.png")
    assert (tmp_path / "m.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert scores["a"]["mass_share"] == pytest.approx(1.0)
    with pytest.raises(UnmaskError, match="--out"):
        plot_mi_maps(grid, {"a": rules}, 0, tmp_path / "m.txt")


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    """A tiny Sudoku MDM, 24 labelled contexts and an estimator trained on them by the CLI."""
    root = tmp_path_factory.mktemp("mi_cli")
    torch.manual_seed(0)
    model = MDMTransformer(sudoku_model_config(d_model=16, n_layers=1, n_heads=2, d_ff=32))
    model.save_pretrained(root / "model")
    model = MDMTransformer.from_pretrained(root / "model")
    write_labels(model, root / "labels", contexts=24, shard_size=12, eps=1e-3)
    torch.manual_seed(1)
    MDMTransformer(sudoku_model_config(d_model=16, n_layers=1, n_heads=2, d_ff=32)) \
        .save_pretrained(root / "other")
    code = main(["mi", "train", "--model", str(root / "model"), "--labels",
                 str(root / "labels"), "--out", str(root / "est"), "--epochs", "3",
                 "--batch-size", "8", "--held-out", "0.25", "--d", "16", "--pair-rank", "4"])
    assert code == 0
    return root


def test_train_writes_an_estimator_tied_to_its_model(tiny_run):
    cfg = json.loads((tiny_run / "est" / "best" / "config.json").read_text())
    model = MDMTransformer.from_pretrained(tiny_run / "model")
    assert cfg["config"]["model_fingerprint"] == model.fingerprint()
    assert cfg["labels"]["contexts"] == 24 and cfg["split"]["held_out_contexts"] >= 1
    assert (tiny_run / "est" / "checkpoint.pt").is_file()


def test_eval_reports_held_out_metrics_and_cost(tiny_run, capsys):
    capsys.readouterr()
    assert main(["mi", "eval", "--model", str(tiny_run / "model"), "--labels",
                 str(tiny_run / "labels"), "--estimator", str(tiny_run / "est" / "best"),
                 "--json"]) == 0
    r = json.loads(capsys.readouterr().out)
    meta = json.loads((tiny_run / "est" / "best" / "config.json").read_text())
    assert r["split"] == "held-out" and r["contexts"] == meta["split"]["held_out_contexts"]
    assert {"mse", "pearson", "spearman", "top_decile_recall"} <= r.keys()
    assert len(r["buckets"]) == 4 and sum(b["contexts"] for b in r["buckets"]) == r["contexts"]
    assert r["cost"]["fraction"] > 0
    assert 0 < r["resolved"]["share"] <= 1 and r["resolved"]["pairs"] <= r["pairs"]
    assert r["probe"]["one_direction"]["pairs"] == r["pairs"]
    assert -1 <= r["probe"]["between_directions"]["spearman"] <= 1
    assert r["probe"]["ceiling"]["mse"] >= 0
    filled = [b for b in r["buckets"] if b["contexts"]]
    assert filled and all(b["probe"]["between_directions"]["pairs"] == b["pairs"] for b in filled)
    assert main(["mi", "eval", "--model", str(tiny_run / "model"), "--labels",
                 str(tiny_run / "labels"), "--estimator", str(tiny_run / "est" / "best"),
                 "--split", "all"]) == 0
    out = capsys.readouterr().out
    assert "all contexts" in out and "24 of 24" in out and "% of a forward" in out
    assert "pairs the labels resolve" in out and "the probe against itself" in out
    assert "a perfect symmetric predictor" in out and "per mask ratio" in out


def test_map_draws_both_sources(tiny_run, capsys, tmp_path):
    puzzle = to_string(load_set("hard")[0][0])
    capsys.readouterr()
    assert main(["mi", "map", puzzle, "--model", str(tiny_run / "model"), "--estimator",
                 str(tiny_run / "est" / "best"), "--source", "gt,estimator", "--cell", "1,1",
                 "--out", str(tmp_path / "map.png"), "--json"]) == 0
    r = json.loads(capsys.readouterr().out)
    assert r["cell"] == "r1c1" and set(r["scores"]) == {"ground truth", "estimator"}
    assert (tmp_path / "map.png").stat().st_size > 10_000


def one_line_error(capsys, argv, match):
    capsys.readouterr()
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and match in err, err


def test_bad_input_is_one_line_and_exit_2(tiny_run, capsys, tmp_path):
    model, labels, est = (str(tiny_run / k) for k in ("model", "labels", "est/best"))
    other = str(tiny_run / "other")
    puzzle = to_string(load_set("hard")[0][0])
    png = str(tmp_path / "m.png")
    base = ["mi", "map", puzzle, "--model", model, "--out", png]
    one_line_error(capsys, ["mi", "map", "12345", "--model", model, "--out", png],
                   "expected 81 cells")
    one_line_error(capsys, base + ["--cell", "10,2"], "--cell")
    one_line_error(capsys, base + ["--cell", "1,2"], "holds the clue 8")
    one_line_error(capsys, base + ["--source", "oracle"], "--source")
    one_line_error(capsys, ["mi", "map", puzzle, "--model", model, "--out",
                            str(tmp_path / "nowhere" / "m.png")], "does not exist")
    one_line_error(capsys, base + ["--source", "estimator", "--estimator", est, "--model",
                                   other], "fingerprint")
    one_line_error(capsys, ["mi", "eval", "--model", other, "--labels", labels, "--estimator",
                            est], "labels: probed on model")
    one_line_error(capsys, ["mi", "train", "--model", other, "--labels", labels,
                            "--out", str(tmp_path / "e")], "labels: probed on model")
    one_line_error(capsys, ["mi", "train", "--model", model, "--labels",
                            str(tmp_path / "none"), "--out", str(tmp_path / "e")],
                   "--labels")


def test_resume_with_other_settings_is_refused_unless_overridden(tiny_run, capsys, tmp_path):
    import shutil

    run = tmp_path / "est"
    shutil.copytree(tiny_run / "est", run)
    args = ["mi", "train", "--model", str(tiny_run / "model"), "--labels",
            str(tiny_run / "labels"), "--out", str(run), "--epochs", "3", "--batch-size", "8",
            "--held-out", "0.25", "--d", "16", "--pair-rank", "4", "--resume"]
    one_line_error(capsys, args + ["--lr", "0.01", "--seed", "2"],
                   "train_config.lr 0.005 -> 0.01; train_config.seed 0 -> 2")
    one_line_error(capsys, args[:-1] + ["--override-config"], "only with --resume")
    assert main(args + ["--lr", "0.01", "--override-config"]) == 0
    assert "going on with other settings: train_config.lr" in capsys.readouterr().out
