"""A tiny training run lowers the loss, and a resumed run equals an uninterrupted one."""

import pytest
import torch

from unmask.errors import UnmaskError
from unmask.models.transformer import MDMTransformer
from unmask.sudoku.train import SudokuPool, sudoku_model_config
from unmask.training import TrainConfig, masked_cross_entropy, train


@pytest.fixture(scope="module")
def pool():
    return SudokuPool.generate(200, seed=3)


def tiny():
    torch.manual_seed(0)
    return MDMTransformer(sudoku_model_config(d_model=32, n_layers=2, n_heads=2, d_ff=64))


def held_out_loss(model, pool):
    inputs, targets, mask = pool.batch(10_000, 256, seed=99)
    with torch.no_grad():
        return float(masked_cross_entropy(model.eval(), inputs, targets, mask))


def test_training_lowers_loss(pool, tmp_path):
    model = tiny()
    before = held_out_loss(model, pool)
    cfg = TrainConfig(batch_size=64, lr=1e-2, warmup_steps=10, total_steps=240, eval_every=120)
    history = train(model, lambda s, b: pool.batch(s, b), cfg, tmp_path, log=lambda s: None)
    assert [h["step"] for h in history] == [120, 240]
    after = held_out_loss(model, pool)
    # below the uniform guess log 9 = 2.197: it learned that peers exclude digits
    assert after < before - 0.1 and after < 2.1, (before, after)
    assert (tmp_path / "checkpoint.pt").is_file()


def test_resume_equals_uninterrupted(pool, tmp_path):
    cfg = TrainConfig(batch_size=16, lr=3e-3, warmup_steps=3, total_steps=12, eval_every=4,
                      bf16=False)
    full = tiny()
    train(full, lambda s, b: pool.batch(s, b), cfg, tmp_path / "a", log=lambda s: None)
    part = tiny()
    half = TrainConfig(**{**cfg.__dict__, "stop_at_step": 6})
    train(part, lambda s, b: pool.batch(s, b), half, tmp_path / "b", log=lambda s: None)
    # paused at step 6, then resumed in a new model object: identical to the full run
    resumed = tiny()
    train(resumed, lambda s, b: pool.batch(s, b), cfg, tmp_path / "b", resume=True,
          log=lambda s: None)
    for (k, a), (_, b) in zip(full.state_dict().items(), resumed.state_dict().items(),
                              strict=True):
        assert torch.equal(a, b), k


def test_resume_needs_checkpoint_and_same_architecture(pool, tmp_path):
    cfg = TrainConfig(batch_size=8, total_steps=2, eval_every=1, warmup_steps=1)
    with pytest.raises(UnmaskError, match="no checkpoint"):
        train(tiny(), lambda s, b: pool.batch(s, b), cfg, tmp_path, resume=True)
    train(tiny(), lambda s, b: pool.batch(s, b), cfg, tmp_path, log=lambda s: None)
    other = MDMTransformer(sudoku_model_config(d_model=16, n_layers=1, n_heads=2, d_ff=32))
    with pytest.raises(UnmaskError, match="another model"):
        train(other, lambda s, b: pool.batch(s, b), cfg, tmp_path, resume=True)


def test_a_checkpoint_older_than_a_model_config_field_still_resumes(pool, tmp_path):
    cfg = TrainConfig(batch_size=8, total_steps=2, eval_every=1, warmup_steps=1)
    train(tiny(), lambda s, b: pool.batch(s, b), cfg, tmp_path, log=lambda s: None)
    ckpt = tmp_path / "checkpoint.pt"
    state = torch.load(ckpt, weights_only=False)
    del state["model_config"]["self_condition"]  # as written before the field existed
    torch.save(state, ckpt)
    logs = []
    train(tiny(), lambda s, b: pool.batch(s, b), cfg, tmp_path, resume=True, log=logs.append)
    assert logs[0].startswith("resumed at step 2")
    other = MDMTransformer(sudoku_model_config(d_model=16, n_layers=1, n_heads=2, d_ff=32))
    with pytest.raises(UnmaskError, match="another model"):
        train(other, lambda s, b: pool.batch(s, b), cfg, tmp_path, resume=True)


def test_batches_are_pure_functions_of_step(pool):
    a, b = pool.batch(7, 16, seed=1), pool.batch(7, 16, seed=1)
    assert all(torch.equal(x, y) for x, y in zip(a, b, strict=True))
    inputs, targets, mask = a
    assert mask.any(1).all()  # every sample has a masked cell
    assert torch.equal(inputs[~mask], targets[~mask]) and (inputs[mask] == 9).all()


def test_decay_by_time_ends_the_schedule_with_whichever_budget_runs_out():
    import math

    from unmask.training import warmup_cosine_lr

    steps = TrainConfig(lr=1e-3, min_lr=1e-5, warmup_steps=10, total_steps=110)
    timed = TrainConfig(**{**steps.__dict__, "max_time_s": 100.0, "decay_by_time": True})
    # warm-up is in steps either way; with no time spent the two schedules agree
    for step in (0, 5, 10, 60, 110):
        assert timed.lr_at(step, 0.0) == steps.lr_at(step)
    assert timed.lr_at(5, 99.0) == steps.lr_at(5)
    # half the time gone at step 20 (a tenth of the steps): the cosine is half way
    assert math.isclose(timed.lr_at(20, 50.0), (1e-3 + 1e-5) / 2)
    assert math.isclose(timed.lr_at(20, 50.0), warmup_cosine_lr(60, 1e-3, 1e-5, 10, 110))
    # the further budget wins: steps ahead of time, time ahead of steps, time out
    assert timed.lr_at(90, 10.0) == steps.lr_at(90)
    assert timed.lr_at(11, 100.0) == timed.lr_at(11, 1e6) == pytest.approx(1e-5)
    # without decay_by_time the clock is ignored
    assert steps.lr_at(20, 50.0) == steps.lr_at(20)
    with pytest.raises(UnmaskError, match="decay_by_time"):
        TrainConfig(decay_by_time=True)


def test_checkpoint_counts_training_time_over_resumes(pool, tmp_path):
    cfg = TrainConfig(batch_size=8, lr=3e-3, warmup_steps=1, total_steps=4, eval_every=2,
                      max_time_s=3600.0, decay_by_time=True, stop_at_step=2)
    train(tiny(), lambda s, b: pool.batch(s, b), cfg, tmp_path, log=lambda s: None)
    first = torch.load(tmp_path / "checkpoint.pt", weights_only=False)["elapsed_s"]
    assert first > 0
    rest = TrainConfig(**{**cfg.__dict__, "stop_at_step": None})
    train(tiny(), lambda s, b: pool.batch(s, b), rest, tmp_path, resume=True,
          log=lambda s: None)
    state = torch.load(tmp_path / "checkpoint.pt", weights_only=False)
    assert state["step"] == 4 and state["elapsed_s"] > first


def test_a_run_stopped_by_its_time_budget_evaluates_its_last_step(pool, tmp_path):
    import time

    def slow_batches(step, size):
        time.sleep(0.05)
        return pool.batch(step, size)

    cfg = TrainConfig(batch_size=8, lr=3e-3, warmup_steps=1, total_steps=1000, eval_every=500,
                      max_time_s=0.3, decay_by_time=True)
    history = train(tiny(), slow_batches, cfg, tmp_path, lambda m: {"accuracy": 0.5},
                    log=lambda s: None)
    state = torch.load(tmp_path / "checkpoint.pt", weights_only=False)
    assert 0 < state["step"] < 500
    assert [h["step"] for h in history] == [state["step"]] and history[0]["best"]
    assert (tmp_path / "best" / "model.safetensors").is_file()
    assert history[0]["lr"] == pytest.approx(cfg.min_lr, rel=0.05)  # the schedule ran out


def test_best_weights_record_the_origin_and_a_resume_keeps_it(pool, tmp_path):
    import json

    cfg = TrainConfig(batch_size=8, total_steps=4, eval_every=2, warmup_steps=1, bf16=False)
    origin = {"init_from": {"model": "parent", "fingerprint": "abc"}}
    score = iter([0.1, 0.2, 0.3])
    train(tiny(), lambda s, b: pool.batch(s, b), TrainConfig(**{**cfg.__dict__,
          "stop_at_step": 2}), tmp_path, lambda m: {"accuracy": next(score)},
          log=lambda s: None, origin=origin)
    best = tmp_path / "best" / "config.json"
    assert json.loads(best.read_text())["origin"] == origin
    # resumed without being told the origin: the checkpoint's is what the new best records
    train(tiny(), lambda s, b: pool.batch(s, b), cfg, tmp_path, lambda m: {"accuracy": next(score)},
          resume=True, log=lambda s: None)
    meta = json.loads(best.read_text())
    assert meta["train"]["step"] == 4 and meta["origin"] == origin
    # a run with no origin writes none
    train(tiny(), lambda s, b: pool.batch(s, b), cfg, tmp_path / "plain",
          lambda m: {"accuracy": 1.0}, log=lambda s: None)
    assert "origin" not in json.loads((tmp_path / "plain" / "best" / "config.json").read_text())
