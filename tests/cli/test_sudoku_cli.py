"""The Sudoku CLI end to end on a tiny random model: JSON schema, bad input, the bench."""

import json

import pytest
import torch

from unmask.cli import main
from unmask.models.transformer import MDMTransformer
from unmask.sudoku.datasets import load_set
from unmask.sudoku.parse import to_string
from unmask.sudoku.train import sudoku_model_config


@pytest.fixture(scope="module")
def tiny_model_dir(tmp_path_factory):
    torch.manual_seed(0)
    path = tmp_path_factory.mktemp("tiny")
    MDMTransformer(sudoku_model_config(d_model=16, n_layers=1, n_heads=2, d_ff=32)
                   ).save_pretrained(path)
    return str(path)


def test_solve_json_schema(tiny_model_dir, capsys):
    puzzles, solutions = load_set("medium")
    # a puzzle with a single blank: any decent decoder fills it; the schema is what we check
    nearly = solutions[0].copy()
    nearly[5] = 0
    args = ["sudoku", "solve", to_string(puzzles[0]), to_string(nearly), "--json",
            "--model", tiny_model_dir]
    assert main(args) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 2
    for line, puzzle in zip(lines, (puzzles[0], nearly), strict=True):
        obj = json.loads(line)
        assert set(obj) >= {"puzzle", "grid", "solved", "nfe"}
        assert obj["puzzle"] == to_string(puzzle)
        assert len(obj["grid"]) == 81 and "." not in obj["grid"]
        assert isinstance(obj["solved"], bool) and isinstance(obj["nfe"], int)
        # clues are kept
        assert all(g == p for g, p in zip(obj["grid"], obj["puzzle"], strict=True) if p != ".")
    assert json.loads(lines[1])["nfe"] == 1


@pytest.mark.parametrize("args, needle", [
    (["sudoku", "solve", "123"], "81"),
    (["sudoku", "solve", "x" * 81], "bad character"),
    (["sudoku", "solve", "11" + "." * 79], "contradict"),
    (["sudoku", "solve"], "no puzzle"),
    (["sudoku", "solve", "." * 81, "--sampler", "nope"], "nope"),
    (["sudoku", "solve", "." * 81, "--sampler", "topk:k=0"], "k"),
    (["sudoku", "solve", "." * 81, "--model", "/nonexistent/model"], "model"),
    (["sudoku", "bench", "--limit", "0"], "--limit"),
    (["sudoku", "train", "--deepen", "2"], "--init-from"),
    (["sudoku", "train", "--device", "nonsense"], "--device"),
    (["sudoku", "train", "--decay-by-time"], "--max-time"),
    (["sudoku", "bench", "--device", "cuda:99"], "--device"),
    (["sudoku", "bench", "--device", "meta"], "only cpu and cuda"),
    (["mi", "label", "--contexts", "1", "--out", "/nonexistent/labels", "--device", "cuda:99"],
     "--device"),
    (["sudoku", "train", "--init-from", "sudoku", "--deepen", "0"], "--deepen"),
    (["sudoku", "train", "--decoder-states", "/nonexistent/states.pt"], "--decoder-states"),
    (["sudoku", "train", "--decoder-states", "x.pt", "--states-fraction", "0"],
     "--states-fraction"),
    (["sudoku", "bench", "--plot", "/nonexistent/dir/p.png"], "does not exist"),
    (["sudoku", "bench", "--limit", "1", "--no-self-condition"], "does not self-condition"),
])
def test_bad_input_one_line_exit_2(args, needle, capsys):
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and needle in err


def test_bench_sudoku_json_and_plot(tiny_model_dir, tmp_path, capsys):
    out, plot = tmp_path / "b.json", tmp_path / "p.png"
    assert main(["sudoku", "bench", "--model", tiny_model_dir, "--limit", "4", "--quiet",
                 "--samplers", "confidence", "topk:k=7", "eb:gamma=0.1,order=confidence",
                 "--json", str(out), "--plot", str(plot)]) == 0
    data = json.loads(out.read_text())
    assert data["puzzles"] == 4 and [r["label"] for r in data["rows"]] == [
        "confidence", "topk k=7", "eb gamma=0.1 order=confidence"]
    from unmask.models.auto import load_model

    assert data["model_fingerprint"] == load_model(tiny_model_dir).fingerprint()
    assert data["estimator"] is None  # no mi-guided row, so no estimator was read
    seq, top7 = data["rows"][0], data["rows"][1]
    for r in data["rows"]:  # per-puzzle outcomes, and the paired count against sequential
        assert len(r["solved_each"]) == 4 and set(r["solved_each"]) <= {"0", "1"}
        assert r["solved"] == r["solved_each"].count("1") / 4
        gained = sum(a > b for a, b in zip(r["solved_each"], seq["solved_each"], strict=True))
        lost = sum(a < b for a, b in zip(r["solved_each"], seq["solved_each"], strict=True))
        assert (r["gained_vs_ref"], r["lost_vs_ref"]) == (gained, lost)
    assert (seq["gained_vs_ref"], seq["lost_vs_ref"]) == (0, 0)
    assert seq["nfe"] == pytest.approx(57.0, abs=10)  # one pass per blank
    assert top7["nfe"] < seq["nfe"] / 5
    assert plot.read_bytes()[:4] == b"\x89PNG"
    printed = capsys.readouterr().out
    assert "physical reference" in printed and "MI estimator" not in printed


def test_bench_sudoku_records_the_estimator_each_mi_guided_row_read(tiny_model_dir, tmp_path,
                                                                    capsys):
    from unmask.mi.estimator import EstimatorConfig, MIEstimator
    from unmask.models.auto import load_model

    model = load_model(tiny_model_dir)
    folders = []
    for seed in (1, 2):  # two estimators of the same model, different weights
        torch.manual_seed(seed)
        est = MIEstimator(EstimatorConfig(hidden_size=model.hidden_size, d=8, n_heads=2,
                                          pair_hidden=2, pair_rank=2,
                                          model_fingerprint=model.fingerprint()))
        est.save(tmp_path / f"est{seed}")
        folders.append((str(tmp_path / f"est{seed}"), est.fingerprint()))
    (a, fa), (b, fb) = folders
    assert fa != fb
    out = tmp_path / "b.json"
    assert main(["sudoku", "bench", "--model", tiny_model_dir, "--limit", "2", "--quiet",
                 "--samplers", "confidence", f"mi-guided:gamma=0.3,estimator={a}",
                 f"mi-guided:gamma=0.6,estimator={b}", f"mi-guided:gamma=1.0,estimator={a}",
                 "--json", str(out)]) == 0
    assert json.loads(out.read_text())["estimator"] == [{"source": a, "fingerprint": fa},
                                                         {"source": b, "fingerprint": fb}]
    printed = capsys.readouterr().out
    assert f"MI estimator: {a} (weights {fa})" in printed
    assert f"MI estimator: {b} (weights {fb})" in printed
    # --estimator gives every mi-guided row the same one: a single record
    assert main(["sudoku", "bench", "--model", tiny_model_dir, "--limit", "2", "--quiet",
                 "--samplers", "mi-guided:gamma=0.3", "--estimator", b, "--json",
                 str(out)]) == 0
    assert json.loads(out.read_text())["estimator"] == {"source": b, "fingerprint": fb}


def test_train_grows_a_self_conditioning_model_and_bench_can_switch_its_input_off(
        tiny_model_dir, tmp_path, capsys):
    out = tmp_path / "sc"
    assert main(["sudoku", "train", "--init-from", tiny_model_dir, "--self-condition",
                 "--out", str(out), "--steps", "2", "--eval-every", "2", "--warmup", "1",
                 "--pool", "20", "--eval-puzzles", "2"]) == 0
    meta = json.loads((out / "best" / "config.json").read_text())
    cfg = meta["config"]
    assert cfg["self_condition"] is True and cfg["n_layers"] == 1
    assert meta["origin"]["self_condition"] is True and "origin" not in meta["origin"]["init_from"]
    for flags, fed in (([], True), (["--no-self-condition"], False)):
        bench = tmp_path / f"b{fed}.json"
        assert main(["sudoku", "bench", "--model", str(out / "best"), "--limit", "2",
                     "--quiet", "--samplers", "confidence", "--json", str(bench)] + flags) == 0
        assert json.loads(bench.read_text())["self_condition"] is fed


@pytest.mark.parametrize("puzzle_set, drawn", [("hard", True), ("medium", False)])
def test_published_points_are_drawn_only_on_the_set_they_were_measured_on(
        tiny_model_dir, tmp_path, monkeypatch, puzzle_set, drawn):
    import unmask.sudoku.bench

    seen = {}
    monkeypatch.setattr(unmask.sudoku.bench, "pareto_plot",
                        lambda rows, path, **kw: seen.update(kw))
    assert main(["sudoku", "bench", "--model", tiny_model_dir, "--set", puzzle_set, "--limit",
                 "2", "--quiet", "--samplers", "topk:k=7", "--plot",
                 str(tmp_path / "p.png")]) == 0
    assert bool(seen["references"]) is drawn


def test_train_a_corrector_then_bench_with_it(tiny_model_dir, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "250")  # the whole table, not rich's narrow fallback
    run = tmp_path / "corr"
    assert main(["corrector", "train", "--model", tiny_model_dir, "--out", str(run),
                 "--puzzles", "20", "--epochs", "1", "--held-out", "0.2",
                 "--samplers", "topk:k=9"]) == 0
    cfg = json.loads((run / "best" / "config.json").read_text())
    assert cfg["model_type"] == "corrector" and cfg["data"]["puzzles"] == 20
    assert cfg["split"] == {"held_out": 0.2, "seed": 0}
    assert "reused" not in capsys.readouterr().out
    # a rerun (--overwrite) with the same data reuses the decoded states; other data decodes
    # anew; without --overwrite the finished run is kept
    argv = ["corrector", "train", "--model", tiny_model_dir, "--out", str(run), "--puzzles",
            "20", "--epochs", "1", "--held-out", "0.2"]
    assert main([*argv, "--samplers", "topk:k=9"]) == 2
    assert "holds a training run" in capsys.readouterr().err
    assert main([*argv, "--samplers", "topk:k=9", "--overwrite"]) == 0
    assert "decoded states: reused" in capsys.readouterr().out
    assert main([*argv, "--samplers", "topk:k=5", "--overwrite"]) == 0
    assert "reused" not in capsys.readouterr().out
    # the decoded states are fine-tuning data for the MDM itself too
    ft = tmp_path / "ft"
    assert main(["sudoku", "train", "--init-from", tiny_model_dir, "--decoder-states",
                 str(run / "states.pt"), "--out", str(ft), "--steps", "2", "--eval-every",
                 "2", "--warmup", "1", "--pool", "20", "--eval-puzzles", "2"]) == 0
    assert "decoder states:" in capsys.readouterr().out
    assert (ft / "best" / "model.safetensors").is_file()
    # the fine-tuned model says what it was grown from, and a fine-tune of it keeps the chain
    from unmask.models.auto import load_model

    origin = json.loads((ft / "best" / "config.json").read_text())["origin"]
    assert origin["init_from"]["fingerprint"] == load_model(tiny_model_dir).fingerprint()
    assert origin["decoder_states"]["file"] == str(run / "states.pt")
    assert origin["decoder_states"]["fraction"] == 0.5 and origin["decoder_states"]["states"] > 0
    ft2 = tmp_path / "ft2"
    assert main(["sudoku", "train", "--init-from", str(ft / "best"), "--out", str(ft2),
                 "--steps", "1", "--eval-every", "1", "--warmup", "1", "--pool", "20",
                 "--eval-puzzles", "2"]) == 0
    chained = json.loads((ft2 / "best" / "config.json").read_text())["origin"]
    assert chained["init_from"]["origin"] == origin and "decoder_states" not in chained
    out = tmp_path / "b.json"
    assert main(["sudoku", "bench", "--model", tiny_model_dir, "--limit", "3", "--quiet",
                 "--samplers", "topk:k=9", "topk:k=9+corrector", "--corrector",
                 str(run / "best"), "--remask-threshold", "0.3", "--json", str(out),
                 "--plot", str(tmp_path / "p.png")]) == 0
    data = json.loads(out.read_text())
    plain, corrected = data["rows"]
    assert corrected["label"] == "topk k=9 +corrector"
    assert (plain["corrected"], corrected["corrected"]) == (False, True)
    from unmask.bench.plot import plot_family

    assert (plot_family(plain), plot_family(corrected)) == ("topk", "topk +corrector")
    assert (tmp_path / "p.png").read_bytes()[:4] == b"\x89PNG"
    assert data["corrector"]["remask_threshold"] == 0.3
    assert plain["remasked"] == 0
    # every corrected row is checked once more after its last MASK is filled
    assert corrected["nfe"] >= plain["nfe"] + 1
    assert "remasked" in capsys.readouterr().out


@pytest.mark.parametrize("args, needle", [
    (["sudoku", "bench", "--limit", "1", "--samplers", "confidence", "--corrector", "x"],
     "+corrector"),
    (["sudoku", "bench", "--limit", "1", "--samplers", "confidence+corrector", "--corrector",
      "/nonexistent/c"], "corrector"),
    (["sudoku", "bench", "--limit", "1", "--samplers", "confidence+corrector",
      "--remask-threshold", "2"], "remask_threshold"),
    (["corrector", "train", "--puzzles", "3"], "--puzzles"),
    (["sudoku", "solve", "." * 81, "--sampler", "confidence+corrector", "--corrector",
      "/nonexistent/c"], "corrector"),
    (["sudoku", "solve", "." * 81, "--corrector", "x"], "+corrector"),
    (["sudoku", "solve", "." * 81, "--sampler", "confidence+corrector", "--remask-threshold",
      "0"], "remask_threshold"),
])
def test_corrector_bad_input_one_line_exit_2(args, needle, capsys):
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and needle in err


def test_solve_with_the_shipped_corrector(capsys):
    """Hard puzzle 74: EB gamma=0.3 fails it alone and solves it with the corrector."""
    puzzles, _ = load_set("hard")
    args = ["sudoku", "solve", to_string(puzzles[74]), "--json", "--sampler"]
    assert main(args + ["eb:gamma=0.3,order=confidence"]) == 0
    plain = json.loads(capsys.readouterr().out)
    assert main(args + ["eb:gamma=0.3,order=confidence+corrector"]) == 0
    fixed = json.loads(capsys.readouterr().out)
    assert not plain["solved"] and fixed["solved"] and fixed["nfe"] > plain["nfe"]


def test_bench_and_solve_verify_a_sampler(tiny_model_dir, tmp_path, capsys):
    out = tmp_path / "v.json"
    assert main(["sudoku", "bench", "--model", tiny_model_dir, "--limit", "3", "--quiet",
                 "--samplers", "confidence", "topk:k=9", "topk:k=9+verify",
                 "--json", str(out), "--plot", str(tmp_path / "p.png")]) == 0
    data = json.loads(out.read_text())
    seq, plain, verified = data["rows"]
    assert verified["label"] == "topk k=9 +verify"
    assert (plain["verified"], verified["verified"]) == (False, True)
    from unmask.bench.plot import plot_family

    assert plot_family(verified) == "topk +verify"
    assert plain["rejected"] == 0
    # an untrained model's nine cells per pass change each other: some wait
    assert verified["rejected"] > 0 and verified["steps"] >= plain["steps"]
    assert verified["nfe"] <= verified["steps"] + 1
    assert verified["sequences"] > verified["nfe"]
    assert "held back" in capsys.readouterr().out
    puzzle = to_string(load_set("hard")[0][0])
    assert main(["sudoku", "solve", puzzle, "--model", tiny_model_dir, "--sampler",
                 "topk:k=9+verify", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["nfe"] > 57 / 9
    # at tolerance 0 the output is sequential decoding's
    outs = []
    for extra in (["--sampler", "confidence"],
                  ["--sampler", "topk:k=9+verify=0"]):
        assert main(["sudoku", "solve", puzzle, "--model", tiny_model_dir, "--json", *extra]) == 0
        outs.append(json.loads(capsys.readouterr().out))
    assert outs[0]["grid"] == outs[1]["grid"] and outs[1]["nfe"] <= outs[0]["nfe"]


@pytest.mark.parametrize("args, needle", [
    (["sudoku", "solve", "." * 81, "--sampler", "eb+verify+corrector"], "cannot be combined"),
    (["sudoku", "solve", "." * 81, "--sampler", "eb+verify=2"], "tolerance in [0, 1]"),
    (["sudoku", "solve", "." * 81, "--sampler", "info-gain+verify"],
     "evaluates its next state"),
    (["sudoku", "bench", "--limit", "1", "--samplers", "eb+verify+corrector"],
     "cannot be combined"),
    (["sudoku", "bench", "--limit", "1", "--samplers", "info-gain+verify"],
     "evaluates its next state"),
])
def test_verify_bad_input_one_line_exit_2(args, needle, capsys):
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and needle in err


@pytest.mark.parametrize("name", ["quality", "lossless", "fast"])
def test_a_preset_solves_as_its_spec_does(tiny_model_dir, capsys, name):
    from unmask.presets import PRESETS

    puzzle = "8..........36......7..9.2...5...7.......457.....1...3...1....68..85...1..9....4.."
    assert main(["sudoku", "solve", "--model", tiny_model_dir, "--preset", name, "--json",
                 puzzle]) == 0
    by_preset = json.loads(capsys.readouterr().out.splitlines()[0])
    # a preset is a name for its spec: the same decode
    assert main(["sudoku", "solve", "--model", tiny_model_dir, "--sampler",
                 PRESETS[name].spec, "--json", puzzle]) == 0
    by_spec = json.loads(capsys.readouterr().out.splitlines()[0])
    assert by_preset["grid"] == by_spec["grid"]
    assert by_preset["nfe"] == by_spec["nfe"]


def test_preset_and_sampler_together_are_refused(tiny_model_dir, capsys):
    puzzle = "8..........36......7..9.2...5...7.......457.....1...3...1....68..85...1..9....4.."
    assert main(["sudoku", "solve", "--model", tiny_model_dir, "--preset", "fast",
                 "--sampler", "confidence", puzzle]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --preset") and err.count("\n") == 1


def test_bench_presets_add_their_rows(tiny_model_dir, tmp_path):
    out = tmp_path / "b.json"
    assert main(["sudoku", "bench", "--model", tiny_model_dir, "--limit", "2", "--quiet",
                 "--samplers", "confidence", "--preset", "lossless", "fast", "--json",
                 str(out)]) == 0
    rows = json.loads(out.read_text())["rows"]
    assert [r["label"].split(" preset=")[-1].split()[0] for r in rows[1:]] == ["lossless", "fast"]
    assert all(r["tokens_per_pass"] >= 1.0 for r in rows)
