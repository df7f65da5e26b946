"""The multiplication task: format, training data, prompts, and the benchmark command."""

import json

import numpy as np
import pytest
import torch

from unmask import UnmaskError
from unmask.arithmetic import (
    MASK_ID,
    EquationFormat,
    arithmetic_model_config,
    format_of,
    task_inputs,
    training_batch,
)
from unmask.arithmetic.format import EQUALS_ID, STAR_ID
from unmask.cli import main
from unmask.models import MDMTransformer


def test_layout_and_encoding():
    fmt = EquationFormat(2, 3)
    assert (fmt.length, fmt.star, fmt.equals, fmt.c_digits) == (12, 2, 6, 5)
    x = fmt.encode(np.array([7, 99]), np.array([13, 999]))
    assert fmt.to_text(x) == ["07*013=00091", "99*999=98901"]
    assert fmt.correct(x).tolist() == [True, True]
    assert [v.tolist() for v in fmt.values(x)] == [[7, 99], [13, 999], [91, 98901]]


def test_correct_needs_format_and_equation():
    fmt = EquationFormat(2, 2)
    x = fmt.encode(np.array([12, 12, 12, 12]), np.array([34, 34, 34, 34]))
    x[1, 9] = 9  # 12*34=0409: wrong product
    x[2, fmt.star] = EQUALS_ID  # operator out of place
    x[3, 0] = STAR_ID  # operator in a digit field
    assert fmt.correct(x).tolist() == [True, False, False, False]
    assert fmt.well_formed(x).tolist() == [True, True, False, False]
    # commuted and zero-padded equations are just as correct
    y = fmt.encode(np.array([34, 0]), np.array([12, 57]))
    assert fmt.correct(y).all() and fmt.to_text(y)[1] == "00*57=0000"


def test_bad_formats_and_factors_name_the_field():
    with pytest.raises(UnmaskError, match="a_digits"):
        EquationFormat(0, 2)
    with pytest.raises(UnmaskError, match="b:"):
        EquationFormat().encode(np.array([1]), np.array([100]))
    with pytest.raises(UnmaskError, match="task"):
        task_inputs(EquationFormat(), "division", 4)


def test_training_batch_is_a_pure_function_of_step_and_holds_true_equations():
    fmt = EquationFormat()
    a = training_batch(fmt, 5, 64, seed=1)
    b = training_batch(fmt, 5, 64, seed=1)
    c = training_batch(fmt, 6, 64, seed=1)
    assert all(torch.equal(u, v) for u, v in zip(a, b, strict=True))
    assert not torch.equal(a[0], c[0])
    inputs, targets, loss_mask = a
    assert fmt.correct(targets).all()
    assert torch.equal(inputs == MASK_ID, loss_mask) and loss_mask.any(1).all()
    assert torch.equal(inputs[~loss_mask], targets[~loss_mask])


def test_task_prompts_mask_the_right_fields():
    fmt = EquationFormat()
    gen, prod, fac = (task_inputs(fmt, t, 16, seed=2) for t in ("generate", "product",
                                                                 "factors"))
    assert (gen == MASK_ID).all()
    assert (prod[:, fmt.field("c")] == MASK_ID).all()
    assert (prod[:, : fmt.equals + 1] != MASK_ID).all()
    masked = fac == MASK_ID
    assert masked[:, fmt.field("a")].all() and masked[:, fmt.field("b")].all()
    assert not masked[:, fmt.equals:].any() and not masked[:, fmt.star].any()
    # the same seed draws the same pairs: factors of one task times product of the other hold
    joined = torch.cat([prod[:, : fmt.equals + 1], fac[:, fmt.equals + 1:]], dim=1)
    assert fmt.correct(joined).all()


def test_model_config_round_trips_the_format(tmp_path):
    fmt = EquationFormat(3, 2)
    model = MDMTransformer(arithmetic_model_config(fmt, d_model=16, n_layers=1, n_heads=2,
                                                   d_ff=32))
    model.save_pretrained(tmp_path / "m")
    loaded = MDMTransformer.from_pretrained(tmp_path / "m")
    assert format_of(loaded) == fmt and loaded.max_length == fmt.length


@pytest.fixture
def tiny_model_dir(tmp_path):
    torch.manual_seed(0)
    model = MDMTransformer(arithmetic_model_config(d_model=16, n_layers=1, n_heads=2, d_ff=32))
    model.save_pretrained(tmp_path / "tiny")
    return tmp_path / "tiny"


def test_bench_command_prints_and_writes_every_task(tiny_model_dir, tmp_path, capsys):
    out = tmp_path / "bench.json"
    rc = main(["arithmetic", "bench", "--model", str(tiny_model_dir), "--limit", "6",
               "--samplers", "confidence", "info-gain", "klass", "--quiet", "--json", str(out),
               "--threads", "1"])
    assert rc == 0
    text = capsys.readouterr().out
    assert "product given -> factors" in text and "info-gain bypass=0.9" in text
    rows = json.loads(out.read_text())["rows"]
    fmt = EquationFormat()
    n_masked = {"generate": fmt.length, "product": fmt.c_digits,
                "factors": fmt.a_digits + fmt.b_digits}
    assert {r["task"] for r in rows} == {"generate", "product", "factors"}
    assert {r["sampler"] for r in rows} == {"confidence", "info-gain", "info-gain bypass=0.9",
                                            "klass"}
    for r in rows:
        assert 0.0 <= r["accuracy"] <= r["well_formed"] <= 1.0
        assert r["sequences"] >= r["nfe"] > 0
        assert r["steps"] <= n_masked[r["task"]]
        # every masked position is decoded: the rates are over those
        assert r["n_items"] == 6 and r["revealed"] == n_masked[r["task"]]
        assert r["tokens_per_pass"] == r["revealed"] / r["nfe"]
        assert r["sequences_per_token"] == r["sequences"] / r["revealed"]
    # sequential decoding: one model call per masked position
    conf = {r["task"]: r for r in rows if r["sampler"] == "confidence"}
    assert all(conf[t]["nfe"] == n_masked[t] for t in conf)
    assert all(conf[t]["tokens_per_pass"] == 1.0 for t in conf)


def test_bench_verified_rows_draft_every_position(tiny_model_dir, tmp_path):
    out = tmp_path / "bench.json"
    assert main(["arithmetic", "bench", "--model", str(tiny_model_dir), "--limit", "6",
                 "--samplers", "confidence", "topk", "--quiet", "--json", str(out),
                 "--threads", "1"]) == 0
    rows = json.loads(out.read_text())["rows"]
    fmt = EquationFormat()
    n_masked = {"generate": fmt.length, "product": fmt.c_digits,
                "factors": fmt.a_digits + fmt.b_digits}
    verified = [r for r in rows if r["verified"]]
    assert {r["sampler"] for r in verified} == {f"topk k={fmt.length} +verify",
                                                f"topk k={fmt.length} +verify=0.03"}
    assert {r["verify_tolerance"] for r in verified} == {1.0, 0.03}
    assert not any(r["verified"] for r in rows if r["sampler"] in ("confidence", "topk k=2"))
    for r in verified:
        assert r["params"] == {"k": fmt.length}
        # a pass reveals at least one position and costs one call (its verification),
        # plus the first pass's own call
        assert r["nfe"] <= n_masked[r["task"]] + 1 and r["sequences"] >= r["nfe"]


def test_bench_rates_and_aup_of_the_shipped_model(tmp_path, capsys):
    from unmask.bench.contract import BenchRow
    from unmask.bench.rows import aup

    out = tmp_path / "bench.json"
    assert main(["arithmetic", "bench", "--limit", "6", "--tasks", "product", "--samplers",
                 "confidence", "topk:k=3", "--quiet", "--json", str(out), "--threads",
                 "1"]) == 0
    report = json.loads(out.read_text())
    rows = {r["sampler"]: r for r in report["rows"]}
    # 3 product digits: one per pass, or all three in one pass
    assert rows["confidence"]["tokens_per_pass"] == 1.0
    assert rows["topk k=3"]["tokens_per_pass"] == 3.0
    for r in rows.values():
        assert r["accuracy"] > 0  # the easy direction: the shipped model gets it right
        assert r["wall_per_solved"] == pytest.approx(r["wall_s"] / (6 * r["accuracy"]))
    score = aup([BenchRow.from_dict(r) for r in report["rows"]])
    assert score is not None and report["aup"] == {"product": score}
    text = capsys.readouterr().out
    assert f"AUP over these rows: {score:.1f} " in text
    assert "tok/pass" in text and "seq/row" in text and "s/solved" in text


def test_bench_command_rejects_bad_input(tiny_model_dir, capsys):
    assert main(["arithmetic", "bench", "--model", str(tiny_model_dir), "--samplers", "nope",
                 "--quiet"]) == 2
    assert "--samplers" in capsys.readouterr().err
    assert main(["arithmetic", "bench", "--model", str(tiny_model_dir), "--tasks", "divide",
                 "--quiet", "--limit", "2"]) == 2


def test_shipped_model_loads_and_multiplies():
    from unmask.arithmetic import accuracy
    from unmask.models.auto import load_model
    from unmask.pretrained import pretrained_path

    model = load_model("arithmetic")
    fmt = format_of(model)
    assert sum(f.stat().st_size for f in pretrained_path("arithmetic").iterdir()) < 600_000
    # the easy direction is a pure function of the prompt: sequential decoding gets it right
    assert accuracy(model, fmt, "product", n=64, seed=1) > 0.9
