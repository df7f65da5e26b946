"""A tiny training run lowers the loss, and a resumed run equals an uninterrupted one."""

import pytest
import torch

from unmask.errors import UnmaskError
from unmask.models.transformer import MDMTransformer
from unmask.sudoku.train import SudokuPool, sudoku_model_config
from unmask.training.loop import LoopConfig, TrainConfig
from unmask.training.mdm import masked_cross_entropy, train


def mdm_config(*, bf16=True, seed=0, device="cpu", **loop) -> TrainConfig:
    """A TrainConfig whose loop is the MDM commands' (their fixed settings, these defaults)."""
    from unmask.commands.flags.training import FIXED_LOOP

    loop = {"batch_size": 128, "lr": 1e-3, "warmup_steps": 500, "eval_every": 1000,
            "metric": "accuracy", **FIXED_LOOP, **loop}
    return TrainConfig(loop=LoopConfig(**loop), bf16=bf16, seed=seed, device=device)


def with_loop(cfg: TrainConfig, **changes) -> TrainConfig:
    """``cfg`` with these loop fields changed."""
    import dataclasses

    return dataclasses.replace(cfg, loop=dataclasses.replace(cfg.loop, **changes))


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
    cfg = mdm_config(batch_size=64, lr=1e-2, warmup_steps=10, total_steps=240, eval_every=120)
    history = train(model, lambda s, b: pool.batch(s, b), cfg, tmp_path, log=lambda s: None)
    assert [h["step"] for h in history] == [120, 240]
    after = held_out_loss(model, pool)
    # below the uniform guess log 9 = 2.197: it learned that peers exclude digits
    assert after < before - 0.1 and after < 2.1, (before, after)
    assert (tmp_path / "checkpoint.pt").is_file()


def test_resume_equals_uninterrupted(pool, tmp_path):
    cfg = mdm_config(batch_size=16, lr=3e-3, warmup_steps=3, total_steps=12, eval_every=4,
                      bf16=False)
    full = tiny()
    train(full, lambda s, b: pool.batch(s, b), cfg, tmp_path / "a", log=lambda s: None)
    part = tiny()
    half = with_loop(cfg, stop_at_step=6)
    train(part, lambda s, b: pool.batch(s, b), half, tmp_path / "b", log=lambda s: None)
    # paused at step 6, then resumed in a new model object: identical to the full run
    resumed = tiny()
    train(resumed, lambda s, b: pool.batch(s, b), cfg, tmp_path / "b", resume=True,
          log=lambda s: None)
    for (k, a), (_, b) in zip(full.state_dict().items(), resumed.state_dict().items(),
                              strict=True):
        assert torch.equal(a, b), k


def test_resume_needs_checkpoint_and_same_architecture(pool, tmp_path):
    cfg = mdm_config(batch_size=8, total_steps=2, eval_every=1, warmup_steps=1)
    with pytest.raises(UnmaskError, match="no checkpoint"):
        train(tiny(), lambda s, b: pool.batch(s, b), cfg, tmp_path, resume=True)
    train(tiny(), lambda s, b: pool.batch(s, b), cfg, tmp_path, log=lambda s: None)
    other = MDMTransformer(sudoku_model_config(d_model=16, n_layers=1, n_heads=2, d_ff=32))
    with pytest.raises(UnmaskError, match="another model"):
        train(other, lambda s, b: pool.batch(s, b), cfg, tmp_path, resume=True)


def test_a_checkpoint_older_than_a_model_config_field_still_resumes(pool, tmp_path):
    cfg = mdm_config(batch_size=8, total_steps=2, eval_every=1, warmup_steps=1)
    train(tiny(), lambda s, b: pool.batch(s, b), cfg, tmp_path, log=lambda s: None)
    ckpt = tmp_path / "checkpoint.pt"
    state = torch.load(ckpt, weights_only=True)
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

    from unmask.training.loop import warmup_cosine_lr

    steps = LoopConfig(lr=1e-3, min_lr=1e-5, warmup_steps=10, total_steps=110)
    timed = LoopConfig(**{**steps.__dict__, "max_time_s": 100.0, "decay_by_time": True})
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
        LoopConfig(total_steps=10, lr=1e-3, decay_by_time=True)


def test_checkpoint_counts_training_time_over_resumes(pool, tmp_path):
    cfg = mdm_config(batch_size=8, lr=3e-3, warmup_steps=1, total_steps=4, eval_every=2,
                      max_time_s=3600.0, decay_by_time=True, stop_at_step=2)
    train(tiny(), lambda s, b: pool.batch(s, b), cfg, tmp_path, log=lambda s: None)
    first = torch.load(tmp_path / "checkpoint.pt", weights_only=True)["elapsed_s"]
    assert first > 0
    rest = with_loop(cfg, stop_at_step=None)
    train(tiny(), lambda s, b: pool.batch(s, b), rest, tmp_path, resume=True,
          log=lambda s: None)
    state = torch.load(tmp_path / "checkpoint.pt", weights_only=True)
    assert state["step"] == 4 and state["elapsed_s"] > first


def test_a_run_stopped_by_its_time_budget_evaluates_its_last_step(pool, tmp_path):
    import time

    def slow_batches(step, size):
        time.sleep(0.05)
        return pool.batch(step, size)

    cfg = mdm_config(batch_size=8, lr=3e-3, warmup_steps=1, total_steps=1000, eval_every=500,
                      max_time_s=0.3, decay_by_time=True)
    history = train(tiny(), slow_batches, cfg, tmp_path, lambda m: {"accuracy": 0.5},
                    log=lambda s: None)
    state = torch.load(tmp_path / "checkpoint.pt", weights_only=True)
    assert 0 < state["step"] < 500
    assert [h["step"] for h in history] == [state["step"]] and history[0]["best"]
    assert (tmp_path / "best" / "model.safetensors").is_file()
    assert history[0]["lr"] == pytest.approx(cfg.loop.min_lr, rel=0.05)  # the schedule ran out


def test_best_weights_record_the_origin_and_a_resume_keeps_it(pool, tmp_path):
    import json

    cfg = mdm_config(batch_size=8, total_steps=4, eval_every=2, warmup_steps=1, bf16=False)
    origin = {"init_from": {"model": "parent", "fingerprint": "abc"}}
    score = iter([0.1, 0.2, 0.3])
    train(tiny(), lambda s, b: pool.batch(s, b), with_loop(cfg,
          stop_at_step=2), tmp_path, lambda m: {"accuracy": next(score)},
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


# -- the loop itself (fit), on a linear model --------------------------------------------------

def _linear_task():
    """A least-squares problem whose batches are a pure function of the step."""
    torch.manual_seed(0)
    w = torch.randn(4, 1)

    def batch(step):
        g = torch.Generator().manual_seed(step)
        x = torch.randn(8, 4, generator=g)
        return x, x @ w

    return batch


def _fit_linear(out, loop, *, resume=False, progress=None, evaluate=None, settings=None,
                override=False, log=None, overwrite=False):
    from unmask.training.loop import fit

    batch = _linear_task()
    torch.manual_seed(1)
    model = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=loop.lr)

    def step(i):
        x, y = batch(i)
        return ((model(x) - y) ** 2).mean()

    res = fit(step, evaluate, loop, out, model=model, optimizer=opt, resume=resume,
              overwrite=overwrite,
              progress=progress, settings=settings, override=override,
              log=log or (lambda s: None))
    return model, res


def test_ctrl_c_in_a_step_saves_a_checkpoint_and_resume_equals_an_uninterrupted_run(tmp_path):
    from unmask.training.loop import LoopConfig

    loop = LoopConfig(total_steps=12, lr=0.05, warmup_steps=2, eval_every=5)
    full, _ = _fit_linear(tmp_path / "a", loop)

    def ctrl_c_at_7(step, loss):
        if step == 7:
            raise KeyboardInterrupt

    logs = []
    with pytest.raises(KeyboardInterrupt):
        _fit_linear(tmp_path / "b", loop, progress=ctrl_c_at_7, log=logs.append)
    assert logs[-1].startswith("interrupted at step 7: checkpoint saved to")
    state = torch.load(tmp_path / "b" / "checkpoint.pt", weights_only=True)
    assert state["step"] == 7  # the steps since the evaluation at 5 are kept
    resumed, res = _fit_linear(tmp_path / "b", loop, resume=True)
    assert res.steps == 12 and res.stopped == "total_steps"
    assert torch.equal(full.weight, resumed.weight) and torch.equal(full.bias, resumed.bias)


def test_early_stopping_counts_evaluations_without_a_better_metric(tmp_path):
    from unmask.training.loop import LoopConfig

    scores = iter([3.0, 2.0, 2.5, 2.0, 2.1, 1.0])
    loop = LoopConfig(total_steps=100, lr=0.01, eval_every=2, metric="m", patience=3)
    _, res = _fit_linear(tmp_path, loop, evaluate=lambda m: {"m": next(scores)})
    # best 2.0 at step 4; 2.5, 2.0 (not lower), 2.1: three without improvement
    assert res.stopped == "early_stopping" and res.steps == 10
    assert res.best == 2.0 and res.best_step == 4
    assert [h.get("best", False) for h in res.history] == [True, True, False, False, False]


def test_an_overwritten_run_starts_a_fresh_history(tmp_path):
    import json

    from unmask.training.loop import LoopConfig

    loop = LoopConfig(total_steps=4, lr=0.01, eval_every=2, metric="m",
                      evaluate_at_start=True)
    for overwrite in (False, True):
        _fit_linear(tmp_path, loop, evaluate=lambda m: {"m": 1.0}, overwrite=overwrite)
    lines = [json.loads(s) for s in (tmp_path / "history.jsonl").read_text().splitlines()]
    assert [r["step"] for r in lines] == [0, 2, 4] and lines[0]["baseline"]
    assert lines[1]["best"]  # the baseline is no candidate for the best weights


# -- checkpoints: nothing in them runs, bad ones are one line ----------------------------------

class _RunsCode:
    """Unpickling this writes a file: what a crafted checkpoint could do."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return exec, (f"open({self.marker!r}, 'w').write('ran')",)


def test_a_checkpoint_that_would_run_code_is_refused_and_nothing_runs(pool, tmp_path):
    cfg = mdm_config(batch_size=8, total_steps=2, eval_every=1, warmup_steps=1)
    marker = tmp_path / "marker"
    ckpt = tmp_path / "run" / "checkpoint.pt"
    ckpt.parent.mkdir()
    torch.save({"step": 1, "history": [], "payload": _RunsCode(marker)}, ckpt)
    with pytest.raises(UnmaskError, match="refused, nothing in it was run") as e:
        train(tiny(), lambda s, b: pool.batch(s, b), cfg, ckpt.parent, resume=True)
    assert "\n" not in str(e.value)
    assert not marker.exists()
    torch.load(ckpt, weights_only=False)  # the control: unpickled freely, it runs
    assert marker.read_text() == "ran"


@pytest.mark.parametrize("damage", ["empty", "truncated", "not a dict"])
def test_a_damaged_checkpoint_is_one_line(pool, tmp_path, damage):
    cfg = mdm_config(batch_size=8, total_steps=2, eval_every=1, warmup_steps=1)
    train(tiny(), lambda s, b: pool.batch(s, b), cfg, tmp_path, log=lambda s: None)
    ckpt = tmp_path / "checkpoint.pt"
    data = ckpt.read_bytes()
    if damage == "not a dict":
        torch.save([1, 2], ckpt)
    else:
        ckpt.write_bytes(b"" if damage == "empty" else data[: len(data) // 2])
    with pytest.raises(UnmaskError, match="resume: .*checkpoint") as e:
        train(tiny(), lambda s, b: pool.batch(s, b), cfg, tmp_path, resume=True)
    assert "\n" not in str(e.value)


def test_resume_with_other_settings_names_them_unless_overridden(pool, tmp_path):
    cfg = mdm_config(batch_size=8, total_steps=4, eval_every=2, warmup_steps=1, seed=0,
                      stop_at_step=2)
    data = {"pool": 200}
    train(tiny(), lambda s, b: pool.batch(s, b), cfg, tmp_path, log=lambda s: None, data=data)
    other = with_loop(cfg, batch_size=16, lr=2e-3, stop_at_step=None)
    with pytest.raises(UnmaskError) as e:
        train(tiny(), lambda s, b: pool.batch(s, b), other, tmp_path, resume=True,
              data={"pool": 300})
    msg = str(e.value)
    assert "other training settings" in msg and "--override-config" in msg
    for field in ("train_config.loop.batch_size 8 -> 16", "train_config.loop.lr",
                  "data.pool 200 -> 300"):
        assert field in msg
    assert "seed" not in msg and "\n" not in msg
    # run fields (time budget, device, a pause) may change; the rest with override only
    later = with_loop(cfg, stop_at_step=3, max_time_s=60.0)
    train(tiny(), lambda s, b: pool.batch(s, b), later, tmp_path, resume=True,
          log=lambda s: None, data=data)
    logs = []
    history = train(tiny(), lambda s, b: pool.batch(s, b), other, tmp_path, resume=True,
                    override=True, log=logs.append, data={"pool": 300})
    assert any("going on with other settings" in s and "batch_size" in s for s in logs)
    assert history[-1]["step"] == 4 and history[-1]["samples"] == 4 * 16
    state = torch.load(tmp_path / "checkpoint.pt", weights_only=True)
    assert state["train_config"]["loop"]["batch_size"] == 16 and state["data"] == {"pool": 300}


def test_checkpoints_hold_plain_data_only(pool, tmp_path):
    import numpy as np

    cfg = mdm_config(batch_size=8, total_steps=2, eval_every=1, warmup_steps=1)
    # metrics as numpy numbers still give a checkpoint that weights_only reads
    train(tiny(), lambda s, b: pool.batch(s, b), cfg, tmp_path,
          lambda m: {"accuracy": np.float64(0.5), "nfe": np.int64(3)}, log=lambda s: None)
    state = torch.load(tmp_path / "checkpoint.pt", weights_only=True)
    assert state["history"][0]["accuracy"] == 0.5 and state["best"] == 0.5


# -- the CLI: seeds, refusals, Ctrl-C ----------------------------------------------------------

TINY_ARITH = ["--batch-size", "8", "--eval-every", "2", "--eval-prompts", "4", "--warmup", "1",
              "--threads", "1", "--no-bf16", "--model-config",
              '{"n_layers": 1, "d_model": 16, "n_heads": 2, "d_ff": 32}']


def _train_arith(out, *extra):
    from unmask.cli import main

    return main(["arithmetic", "train", "--out", str(out), *TINY_ARITH, *extra])


def test_the_seed_seeds_the_weights(tmp_path, capsys):
    from safetensors.torch import load_file

    for name, seed in (("a", "3"), ("b", "3"), ("c", "4")):
        assert _train_arith(tmp_path / name, "--steps", "2", "--seed", seed) == 0
    a, b, c = (load_file(str(tmp_path / n / "best" / "model.safetensors")) for n in "abc")
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert not all(torch.equal(a[k], c[k]) for k in a)


def test_cli_refusals_on_resume_are_one_line_exit_2(tmp_path, capsys):
    assert _train_arith(tmp_path, "--steps", "2") == 0
    capsys.readouterr()
    assert _train_arith(tmp_path, "--steps", "4", "--resume", "--batch-size", "16") == 2
    err = capsys.readouterr().err
    assert err.startswith("error: resume:") and err.count("\n") == 1
    assert "train_config.loop.batch_size 8 -> 16" in err
    assert "train_config.loop.total_steps 2 -> 4" in err
    assert _train_arith(tmp_path, "--steps", "2", "--override-config") == 2
    assert "--override-config: only with --resume" in capsys.readouterr().err
    ckpt = tmp_path / "checkpoint.pt"
    marker = tmp_path / "marker"
    for content in (b"", ckpt.read_bytes()[:100], None):
        if content is None:
            torch.save({"x": _RunsCode(marker)}, ckpt)
        else:
            ckpt.write_bytes(content)
        assert _train_arith(tmp_path, "--steps", "2", "--resume") == 2
        err = capsys.readouterr().err
        assert err.startswith("error: resume:") and err.count("\n") == 1
    assert not marker.exists()


def test_sigint_during_training_saves_a_checkpoint_and_exits_130(tmp_path):
    import os
    import signal
    import subprocess
    import sys
    import time
    from pathlib import Path

    src = Path(__file__).resolve().parents[2] / "src"
    env = {**os.environ, "PYTHONPATH": f"{src}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    out = tmp_path / "run"
    proc = subprocess.Popen(
        [sys.executable, "-m", "unmask", "arithmetic", "train", "--out", str(out),
         "--steps", "1000000", *[a if a != "2" else "1" for a in TINY_ARITH]],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.time() + 120
        while not (out / "history.jsonl").is_file():  # evaluated every step: under way
            assert proc.poll() is None and time.time() < deadline, proc.stderr.read()
            time.sleep(0.1)
        time.sleep(0.5)
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == 130, stderr
    assert "interrupted at step" in stdout and "checkpoint saved" in stdout
    assert "Traceback" not in stderr
    state = torch.load(out / "checkpoint.pt", weights_only=True)
    assert state["step"] >= 1
    assert f"interrupted at step {state['step']}:" in stdout


def test_written_weights_have_the_usual_permissions(tmp_path):
    import os
    import stat

    old = os.umask(0o022)
    try:
        tiny().save_pretrained(tmp_path / "m")
        from unmask.io import atomic_path

        with atomic_path(tmp_path / "x.txt") as tmp:
            tmp.write_text("x")
    finally:
        os.umask(old)
    for f in (tmp_path / "m" / "model.safetensors", tmp_path / "m" / "config.json",
              tmp_path / "x.txt"):
        assert stat.S_IMODE(f.stat().st_mode) == 0o644, f


def test_mask_batch_masks_below_the_ratio_among_eligible_and_at_least_one():
    import numpy as np

    from unmask.training.mdm import mask_batch

    targets = torch.arange(8).view(2, 4)
    ratio = np.array([[0.5], [0.1]])
    draw = np.array([[0.4, 0.6, 0.2, 0.9], [0.3, 0.2, 0.8, 0.5]])
    eligible = np.array([[True, True, False, True], [True, False, True, True]])
    inputs, loss = mask_batch(targets, ratio, draw, 99, eligible)
    # row 0: 0.4 < 0.5 (position 2 is below too, but not eligible); row 1: none below 0.1,
    # so the eligible position of least draw (0.3 at 0; 0.2 at 1 is not eligible)
    assert loss.tolist() == [[True, False, False, False], [True, False, False, False]]
    assert inputs.tolist() == [[99, 1, 2, 3], [99, 5, 6, 7]]
    _, every = mask_batch(targets, np.ones((2, 1)), draw, 99)
    assert every.all()


# -- run folders written before TrainConfig held a LoopConfig ---------------------------------

#: TrainConfig as checkpoints wrote it before it held a LoopConfig: one flat dict (the literal
#: layout, from a run with --batch-size 8 --lr 3e-3 --warmup 1 --steps 4 --eval-every 2)
FLAT_RECORD = {"batch_size": 8, "lr": 0.003, "min_lr": 5e-05, "weight_decay": 0.05,
               "warmup_steps": 1, "total_steps": 4, "grad_clip": 1.0, "bf16": False,
               "eval_every": 2, "checkpoint_every_s": 300.0, "max_time_s": None,
               "stop_at_step": 2, "decay_by_time": False, "seed": 0, "device": "cpu",
               "select_metric": "accuracy", "patience": None}


def test_a_flat_train_config_record_reads_as_the_nested_config():
    from unmask.training.loop import saved_config

    cfg = TrainConfig.from_record(FLAT_RECORD)
    assert cfg == mdm_config(batch_size=8, lr=3e-3, warmup_steps=1, total_steps=4,
                             eval_every=2, stop_at_step=2, bf16=False)
    assert cfg.loop.metric == "accuracy" and cfg.loop.higher_is_better
    # a record older than some fields: the defaults those fields had
    older = {k: v for k, v in FLAT_RECORD.items()
             if k not in ("patience", "decay_by_time", "stop_at_step")}
    assert TrainConfig.from_record(older) == with_loop(cfg, stop_at_step=None)
    # the nested layout reads back as itself; what is neither is no TrainConfig
    from dataclasses import asdict
    assert TrainConfig.from_record(asdict(cfg)) == cfg
    assert saved_config(TrainConfig, {**FLAT_RECORD, "momentum": 0.9}) is None
    assert saved_config(TrainConfig, {"loop": 3}) is None


def _write_flat_run(pool, out):
    """A run folder as the flat-record code left it: paused at step 2 of 4."""
    cfg = TrainConfig.from_record(FLAT_RECORD)
    train(tiny(), lambda s, b: pool.batch(s, b), cfg, out, log=lambda s: None)
    state = torch.load(out / "checkpoint.pt", weights_only=True)
    assert state["step"] == 2
    state["train_config"] = dict(FLAT_RECORD)
    torch.save(state, out / "checkpoint.pt")
    return with_loop(cfg, stop_at_step=None)


def test_a_run_folder_with_a_flat_record_resumes_as_an_uninterrupted_run(pool, tmp_path):
    rest = _write_flat_run(pool, tmp_path / "old")
    logs = []
    resumed = tiny()
    history = train(resumed, lambda s, b: pool.batch(s, b), rest, tmp_path / "old",
                    resume=True, log=logs.append)
    assert logs[0].startswith("resumed at step 2")
    assert not any("other settings" in s or "records no" in s for s in logs)
    assert [h["step"] for h in history] == [2, 4]
    full = tiny()
    train(full, lambda s, b: pool.batch(s, b), rest, tmp_path / "new", log=lambda s: None)
    for (k, a), (_, b) in zip(full.state_dict().items(), resumed.state_dict().items(),
                              strict=True):
        assert torch.equal(a, b), k
    # from now on the checkpoint records the nested layout
    state = torch.load(tmp_path / "old" / "checkpoint.pt", weights_only=True)
    assert state["train_config"]["loop"]["total_steps"] == 4 and "lr" not in \
        state["train_config"]


def test_a_flat_record_keeps_what_a_resume_may_change(pool, tmp_path):
    rest = _write_flat_run(pool, tmp_path)
    # another schedule is refused, named by its place in the nested config
    with pytest.raises(UnmaskError, match=r"train_config\.loop\.lr 0\.003 -> 0\.002") as e:
        train(tiny(), lambda s, b: pool.batch(s, b), with_loop(rest, lr=2e-3), tmp_path,
              resume=True)
    assert "batch_size" not in str(e.value) and "stop_at_step" not in str(e.value)
    # the run fields (time budget, evaluation interval, pause, device) may change
    later = with_loop(rest, max_time_s=60.0, eval_every=1, stop_at_step=3)
    history = train(tiny(), lambda s, b: pool.batch(s, b), later, tmp_path, resume=True,
                    log=lambda s: None)
    assert history[-1]["step"] == 3
    # with decay_by_time the time budget is part of the schedule
    assert "loop.max_time_s" in rest.run_fields()
    timed = with_loop(rest, max_time_s=60.0, decay_by_time=True)
    assert "loop.max_time_s" not in timed.run_fields() and "device" in timed.run_fields()


def test_the_cli_resumes_a_run_folder_with_a_flat_record(tmp_path, capsys):
    assert _train_arith(tmp_path, "--steps", "4") == 0
    state = torch.load(tmp_path / "checkpoint.pt", weights_only=True)
    # what the flat-record code wrote for these flags (arithmetic's default lr is 2e-3)
    state["train_config"] = {**FLAT_RECORD, "lr": 2e-3, "stop_at_step": None}
    torch.save(state, tmp_path / "checkpoint.pt")
    capsys.readouterr()
    assert _train_arith(tmp_path, "--steps", "6", "--resume") == 2
    assert "train_config.loop.total_steps 4 -> 6" in capsys.readouterr().err
    assert _train_arith(tmp_path, "--steps", "4", "--resume") == 0
    out = capsys.readouterr().out
    assert "resumed at step 4" in out and "other settings" not in out
