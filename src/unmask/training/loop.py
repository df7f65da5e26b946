"""One training loop (:func:`fit`) and the configuration of a trainer over it
(:class:`TrainConfig`); the MDM's training is :mod:`unmask.training.mdm`.

:func:`fit` owns what every trainer here shares: the learning-rate schedule (linear warm-up,
cosine decay, optionally by time), evaluation and the best weights, early stopping, the time
budget, checkpoint and resume (read with ``torch.load(..., weights_only=True)``: a checkpoint
holds tensors, numbers, strings, lists and dicts, nothing that runs code), the history
(``history.jsonl``), and a checkpoint on Ctrl-C. A trainer gives it a step (step index -> loss)
and an evaluation. Batches are a pure function of (seed, step) in every trainer, so a resumed
run sees exactly the batches an uninterrupted run would have seen.
"""

from __future__ import annotations

import dataclasses
import json
import math
import pickle
import signal
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import ClassVar

import torch

from unmask.errors import UnmaskError, require
from unmask.io import atomic_path

#: step index -> scalar training loss of that step's batch (with gradient)
StepFn = Callable[[int], torch.Tensor]

CHECKPOINT = "checkpoint.pt"
HISTORY = "history.jsonl"


# -- the schedule ----------------------------------------------------------------------------

def warmup_cosine_lr(step: int, lr: float, min_lr: float, warmup_steps: int,
                     total_steps: int) -> float:
    """Linear warmup to ``lr`` over ``warmup_steps``, then cosine decay to ``min_lr`` at
    ``total_steps`` (the schedule of every training loop here)."""
    if step < warmup_steps:
        return lr * (step + 1) / warmup_steps
    frac = min(1.0, (step - warmup_steps) / max(1, total_steps - warmup_steps))
    return min_lr + 0.5 * (lr - min_lr) * (1 + math.cos(math.pi * frac))


@dataclass
class LoopConfig:
    """What :func:`fit` runs.

    total_steps: optimiser steps of the whole run (the schedule's length).
    lr, min_lr, warmup_steps: the schedule (:func:`warmup_cosine_lr`).
    eval_every: steps between evaluations (and checkpoints); the last step is evaluated too.
    metric, higher_is_better: the key of evaluate()'s dict that picks the best weights.
    patience: evaluations without a better ``metric`` before stopping (None: never stop early).
    max_time_s: stop after this many seconds of this run (with ``decay_by_time``: of all runs
        of the checkpoint together).
    decay_by_time: with ``max_time_s``, the cosine is as far along as the further of the two
        budgets, steps or time, so a run whose speed is unknown still ends its schedule.
    stop_at_step: pause here (resume later) without changing the schedule.
    checkpoint_every_s: also checkpoint between evaluations after this many seconds.
    grad_clip: clip the gradient norm to this (None: no clipping).
    batch_size: with it, each record counts the samples seen and their rate.
    steps_per_epoch: with it, each record gives the epoch.
    evaluate_at_start: a fresh run first records the evaluation of the untrained weights (a
        baseline for the history, never saved as the best).
    """

    total_steps: int
    lr: float
    min_lr: float = 0.0
    warmup_steps: int = 0
    eval_every: int = 1000
    metric: str = "loss"
    higher_is_better: bool = False
    patience: int | None = None
    max_time_s: float | None = None
    decay_by_time: bool = False
    stop_at_step: int | None = None
    checkpoint_every_s: float = 300.0
    grad_clip: float | None = None
    batch_size: int | None = None
    steps_per_epoch: int | None = None
    evaluate_at_start: bool = False

    #: fields a resumed run may change: where and how long it runs, not what it trains
    RUN_FIELDS: ClassVar[tuple[str, ...]] = ("checkpoint_every_s", "stop_at_step",
                                             "eval_every", "max_time_s")

    def __post_init__(self):
        require(self.total_steps >= 1, f"total_steps: must be >= 1, got {self.total_steps}")
        require(self.eval_every >= 1, f"eval_every: must be >= 1, got {self.eval_every}")
        require(self.lr > 0 and self.min_lr >= 0, "lr, min_lr: must be positive")
        require(self.patience is None or self.patience >= 1,
                f"patience: must be >= 1, got {self.patience}")
        require(not self.decay_by_time or (self.max_time_s or 0) > 0,
                "decay_by_time: needs a time budget (max_time_s > 0)")

    def lr_at(self, step: int, elapsed_s: float = 0.0) -> float:
        """The learning rate at ``step``, ``elapsed_s`` seconds into training (which matters
        only with ``decay_by_time``: the schedule is then as far along as the further of the
        two budgets)."""
        if self.decay_by_time and step >= self.warmup_steps:
            span = self.total_steps - self.warmup_steps
            step = max(step, self.warmup_steps + span * min(1.0, elapsed_s / self.max_time_s))
        return warmup_cosine_lr(step, self.lr, self.min_lr, self.warmup_steps, self.total_steps)

    def run_fields(self) -> tuple[str, ...]:
        """:attr:`RUN_FIELDS`, less the time budget where the schedule decays by it."""
        return tuple(f for f in self.RUN_FIELDS
                     if not (self.decay_by_time and f == "max_time_s"))


@dataclass
class FitResult:
    """What :func:`fit` ran: the evaluation ``history``, the optimiser ``steps`` done, the
    ``best`` metric and its step (``best_step``, 0 = none yet), and why it ``stopped``
    ('total_steps', 'early_stopping', 'max_time' or 'stop_at_step')."""

    history: list[dict]
    steps: int
    best: float
    best_step: int
    stopped: str


# -- checkpoints -----------------------------------------------------------------------------

def adamw(module: torch.nn.Module, lr: float, weight_decay: float,
          betas: tuple[float, float] = (0.9, 0.999)) -> torch.optim.AdamW:
    """AdamW with weight decay on matrices only (biases, norms and scalars undecayed)."""
    params = list(module.parameters())
    return torch.optim.AdamW([{"params": [p for p in params if p.dim() >= 2],
                               "weight_decay": weight_decay},
                              {"params": [p for p in params if p.dim() < 2],
                               "weight_decay": 0.0}], lr=lr, betas=betas)


def save_checkpoint(path: Path, state: dict) -> None:
    """Write a training checkpoint atomically (a kill never leaves half a file)."""
    with atomic_path(path) as tmp:
        torch.save(state, tmp)


def read_checkpoint(path: str | Path, device="cpu") -> dict:
    """A checkpoint's dict, read with ``weights_only=True``: anything but tensors and plain
    data (an object whose unpickling would run code) is refused before it is built.
    :class:`UnmaskError` when there is no checkpoint or it cannot be read."""
    path = Path(path)
    if not path.is_file():
        raise UnmaskError(f"resume: no checkpoint at {path}")
    try:
        state = torch.load(path, map_location=device, weights_only=True)
    except pickle.UnpicklingError:
        raise UnmaskError(f"resume: {path} is not a checkpoint of tensors and plain data "
                          "(corrupt, or it holds objects; refused, nothing in it was run)"
                          ) from None
    except (RuntimeError, EOFError, OSError, ValueError) as e:
        raise UnmaskError(f"resume: {path} is truncated or corrupt ({type(e).__name__})"
                          ) from None
    if not isinstance(state, dict):
        raise UnmaskError(f"resume: {path} is not a training checkpoint")
    return state


def saved_config(cls, saved: dict | None):
    """``cls(**saved)`` (or ``cls.from_record(saved)`` where ``cls`` reads older layouts): a
    config dataclass recorded as a dict, read back with the defaults of the fields it
    predates; None when ``saved`` is missing or is not a valid ``cls``."""
    if not isinstance(saved, dict):
        return None
    try:
        return cls.from_record(saved) if hasattr(cls, "from_record") else cls(**saved)
    except (TypeError, UnmaskError):
        return None


def _flat(record: dict, prefix: str = "") -> dict:
    """A nested dict as one level of dotted keys: {"loop": {"lr": 1}} -> {"loop.lr": 1}."""
    out = {}
    for key, value in record.items():
        if isinstance(value, dict) and value:
            out.update(_flat(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def _as_record(value) -> dict:
    """A config (dataclass) or dict as the plain dict a checkpoint stores."""
    return asdict(value) if dataclasses.is_dataclass(value) else dict(value)


def run_fields(value) -> tuple[str, ...]:
    """The fields of a settings dataclass that may differ on resume (its ``RUN_FIELDS``, or
    its ``run_fields()``): per-run budgets and places, not the training itself."""
    method = getattr(value, "run_fields", None)
    return tuple(method()) if callable(method) else tuple(getattr(value, "RUN_FIELDS", ()))


def settings_differences(state: dict, settings: Mapping[str, object]) -> tuple[list[str],
                                                                                list[str]]:
    """(differences, unrecorded) between the ``settings`` (name -> dataclass or dict) of this
    run and those a checkpoint ``state`` records: 'name.field saved -> now' for each field that
    differs (a dataclass's run fields aside; a nested config's fields named with dots, e.g.
    'train_config.loop.lr'), and the names the checkpoint does not record."""
    diffs, unrecorded = [], []
    for name, value in settings.items():
        saved = state.get(name)
        if not isinstance(saved, dict):
            unrecorded.append(name)
            continue
        if dataclasses.is_dataclass(value):
            restored = saved_config(type(value), saved)
            if restored is None:
                diffs.append(f"{name} (unreadable: {sorted(saved)})")
                continue
            old, new = _flat(asdict(restored)), _flat(asdict(value))
            skip = set(run_fields(value))
        else:
            old, new, skip = saved, dict(value), set()
        for key in sorted(set(old) | set(new)):
            skipped = key in skip or any(key.startswith(f"{field}.") for field in skip)
            if not skipped and old.get(key) != new.get(key):
                diffs.append(f"{name}.{key} {old.get(key)!r} -> {new.get(key)!r}")
    return diffs, unrecorded


def append_history(out: Path, history: list[dict], record: dict, log) -> None:
    """Append one evaluation ``record`` to ``history`` and to OUT/history.jsonl, and log it as
    one line of key=value pairs."""
    history.append(record)
    with open(out / HISTORY, "a") as f:
        f.write(json.dumps(record) + "\n")
    log(" ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}"
                 for k, v in record.items()))


def plain_record(record: dict) -> dict:
    """``record`` with numpy scalars and the like made plain numbers (a checkpoint read with
    weights_only holds nothing else)."""
    return json.loads(json.dumps(record, default=lambda v: v.item()))


# -- the loop --------------------------------------------------------------------------------

class _Fit:
    """The state of one :func:`fit` call (see there)."""

    def __init__(self, step_fn, evaluate, cfg: LoopConfig, out: Path, model, optimizer,
                 save_best, weights_key: str, identity: dict, settings: dict, meta: dict,
                 log, progress):
        self.step_fn, self.evaluate, self.cfg, self.out = step_fn, evaluate, cfg, out
        self.model, self.opt, self.save_best = model, optimizer, save_best
        self.weights_key, self.identity, self.settings = weights_key, identity, settings
        self.meta, self.log, self.progress = dict(meta), log, progress
        self.ckpt = out / CHECKPOINT
        self.step, self.history, self.bad, self.best_step = 0, [], 0, 0
        self.best = -math.inf if cfg.higher_is_better else math.inf
        self.train_loss: float | None = None
        self.elapsed_before = 0.0  # training seconds of earlier runs of this checkpoint
        self.start = time.time()
        self.window = (time.time(), 0)  # start and steps of the current rate window
        self.updating = False  # inside the optimiser update: Ctrl-C waits for its end
        self.interrupted = False

    def elapsed(self) -> float:
        return self.elapsed_before + time.time() - self.start

    def resume(self, override: bool) -> None:
        state = read_checkpoint(self.ckpt)
        for key, value in self.identity.items():
            if saved_config(type(value), state.get(key)) != value:
                what = key.replace("_config", " configuration").replace("_", " ")
                raise UnmaskError(f"resume: {self.ckpt} was written for another {what}")
        diffs, unrecorded = settings_differences(state, self.settings)
        if diffs and not override:
            raise UnmaskError(f"resume: {self.ckpt} was written with other training settings: "
                              f"{'; '.join(diffs)} (pass --override-config to go on with "
                              "these)")
        try:
            self.model.load_state_dict(state[self.weights_key])
            self.opt.load_state_dict(state["optimizer"])
            self.step, self.history, self.best = state["step"], state["history"], state["best"]
        except (KeyError, RuntimeError, ValueError, TypeError) as e:
            raise UnmaskError(f"resume: {self.ckpt} does not fit this run ({type(e).__name__}: "
                              f"{str(e).splitlines()[0][:120]})") from None
        self.best_step, self.bad = state.get("best_step", 0), state.get("bad", 0)
        self.train_loss, self.elapsed_before = state.get("train_loss"), state.get("elapsed_s",
                                                                                  0.0)
        self.meta.update({k: state[k] for k in self.meta if k in state})
        samples = (f" ({self.step * self.cfg.batch_size:,} samples)"
                   if self.cfg.batch_size else "")
        self.log(f"resumed at step {self.step}{samples}, best {self.cfg.metric} {self.best:.5g}")
        if diffs:
            self.log(f"resume: going on with other settings: {'; '.join(diffs)}")
        if unrecorded:
            self.log(f"resume: the checkpoint records no {', '.join(unrecorded)} (not checked)")

    def checkpoint(self) -> None:
        save_checkpoint(self.ckpt, {
            self.weights_key: self.model.state_dict(), "optimizer": self.opt.state_dict(),
            "step": self.step, "history": self.history, "best": self.best,
            "best_step": self.best_step, "bad": self.bad, "train_loss": self.train_loss,
            "elapsed_s": self.elapsed(), **self.meta,
            **{k: _as_record(v) for k, v in {**self.identity, **self.settings}.items()}})

    def record(self, baseline: bool = False) -> None:
        """Evaluate, keep the best weights, log a line of history and checkpoint."""
        cfg, now = self.cfg, time.time()
        rec: dict = {"step": self.step}
        if cfg.steps_per_epoch:
            rec["epoch"] = round(self.step / cfg.steps_per_epoch, 2)
        if cfg.batch_size:
            rate = (self.step - self.window[1]) * cfg.batch_size / max(1e-9, now - self.window[0])
            rec.update(samples=self.step * cfg.batch_size, samples_per_s=round(rate, 1))
        self.window = (now, self.step)
        rec.update(train_loss=self.train_loss, lr=cfg.lr_at(self.step, self.elapsed()),
                   wall_s=round(now - self.start, 1))
        if self.evaluate is not None:
            self.model.eval()
            rec.update(plain_record(self.evaluate(self.model)))
            score = rec.get(cfg.metric)
            if baseline:
                rec["baseline"] = True
            elif score is not None and (score > self.best if cfg.higher_is_better
                                        else score < self.best):
                self.best, self.best_step, self.bad = score, self.step, 0
                rec["best"] = True
                if self.save_best is not None:
                    self.save_best(rec, self.meta)
            else:
                self.bad += 1
        append_history(self.out, self.history, plain_record(rec), self.log)
        self.checkpoint()

    def stop_reason(self) -> str | None:
        cfg = self.cfg
        if self.step >= cfg.total_steps:
            return "total_steps"
        if cfg.patience is not None and self.bad >= cfg.patience:
            return "early_stopping"
        if cfg.stop_at_step is not None and self.step >= cfg.stop_at_step:
            return "stop_at_step"
        spent = self.elapsed() if cfg.decay_by_time else time.time() - self.start
        if cfg.max_time_s is not None and spent > cfg.max_time_s:
            return "max_time"
        return None

    def one_step(self) -> None:
        for g in self.opt.param_groups:
            g["lr"] = self.cfg.lr_at(self.step, self.elapsed())
        self.model.train()
        loss = self.step_fn(self.step)
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        self.updating = True
        if self.cfg.grad_clip is not None:
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.cfg.grad_clip)
        self.opt.step()
        self.step += 1
        self.updating = False
        if self.interrupted:
            raise KeyboardInterrupt
        value = float(loss.detach())
        self.train_loss = value if self.train_loss is None else \
            0.95 * self.train_loss + 0.05 * value

    def run(self) -> str:
        last_ckpt = time.time()
        self.window = (last_ckpt, self.step)
        due = self.step % self.cfg.eval_every == 0 or self.step == self.cfg.total_steps
        if self.step and due and (not self.history or self.history[-1]["step"] != self.step):
            self.record()  # a resume from an evaluation that was interrupted
        while (stopped := self.stop_reason()) is None:
            self.one_step()
            if self.progress is not None:
                self.progress(self.step, self.train_loss)
            if self.step % self.cfg.eval_every == 0 or self.step == self.cfg.total_steps:
                self.record()
                last_ckpt = time.time()
            elif time.time() - last_ckpt > self.cfg.checkpoint_every_s:
                self.checkpoint()
                last_ckpt = time.time()
        if stopped == "max_time" and self.step and (not self.history
                                                    or self.history[-1]["step"] != self.step):
            self.record()  # the steps since the last evaluation are part of the run's result
        self.checkpoint()
        return stopped

    def on_sigint(self, signum, frame) -> None:
        if self.updating:  # finish the optimiser update, then stop (a consistent checkpoint)
            self.interrupted = True
        else:
            raise KeyboardInterrupt


def check_run_folder(out: str | Path, *, resume: bool, overwrite: bool) -> None:
    """Refuse, in one line, to start a fresh run in a folder that holds one (a checkpoint or
    a history) unless ``overwrite``; ``resume`` and ``overwrite`` exclude each other."""
    out = Path(out)
    require(not (resume and overwrite), "overwrite: cannot be combined with resume (--resume)")
    held = [name for name in (CHECKPOINT, HISTORY) if (out / name).exists()]
    require(resume or overwrite or not held,
            f"out: {out} holds a training run ({held[0] if held else ''}); continue it with "
            "--resume or replace it with --overwrite")


def fit(step: StepFn, evaluate: Callable[[torch.nn.Module], dict] | None, config: LoopConfig,
        out_dir: str | Path, *, model: torch.nn.Module, optimizer: torch.optim.Optimizer,
        save_best: Callable[[dict, dict], None] | None = None, resume: bool = False,
        override: bool = False, overwrite: bool = False, identity: Mapping[str,
            object] | None = None,
        settings: Mapping[str, object] | None = None, meta: Mapping[str, object] | None = None,
        weights_key: str = "model", log: Callable[[str], None] = print,
        progress: Callable[[int, float], None] | None = None) -> FitResult:
    """Train ``model`` with ``optimizer``: ``step(i)`` returns the loss of step i's batch (a
    pure function of i, so a resumed run repeats nothing and skips nothing), and ``fit`` sets
    the learning rate (``config.lr_at``), backpropagates, clips and steps.

    Every ``config.eval_every`` steps (and at the last) ``evaluate(model)`` gives metrics; a
    better ``config.metric`` calls ``save_best(record, meta)``; one JSON line per evaluation
    goes to OUT/history.jsonl (started afresh by a fresh run) and OUT/checkpoint.pt is
    rewritten (also every ``config.checkpoint_every_s`` seconds and at the end). Ctrl-C
    (KeyboardInterrupt) writes a checkpoint of the steps done, says so in one line and is
    raised again.

    Args:
        resume: continue from OUT/checkpoint.pt (read with weights_only).
        overwrite: start afresh in an OUT that holds a run (its checkpoint and history are
            replaced); without it, or ``resume``, such an OUT is refused in one line.
        identity: name -> config dataclass the checkpoint must have been written for (the
            architecture); another is refused.
        settings: name -> config dataclass or dict of the training (schedule, data, seed);
            on resume a difference is refused with the differing fields named, unless
            ``override`` (then logged and recorded from now on). A dataclass's run fields
            (``RUN_FIELDS`` or ``run_fields()``: time budgets, devices) may differ.
        meta: name -> plain data recorded in the checkpoint; on resume the checkpoint's values
            win (what a run started from stays what it started from).
        weights_key: the checkpoint key of the model's weights.
        progress: called with (step, smoothed training loss) after every step.

    Returns:
        :class:`FitResult`.
    """
    out = Path(out_dir)
    check_run_folder(out, resume=resume, overwrite=overwrite)
    out.mkdir(parents=True, exist_ok=True)
    loop = _Fit(step, evaluate, config, out, model, optimizer, save_best, weights_key,
                dict(identity or {}), dict(settings or {}), dict(meta or {}), log, progress)
    if resume:
        loop.resume(override)
    else:
        (out / HISTORY).unlink(missing_ok=True)
        if config.evaluate_at_start and evaluate is not None:
            loop.record(baseline=True)
    main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGINT, loop.on_sigint) if main else None
    try:
        stopped = loop.run()
    except KeyboardInterrupt:
        loop.checkpoint()
        log(f"interrupted at step {loop.step}: checkpoint saved to {loop.ckpt} (continue with "
            "--resume)")
        raise
    finally:
        if main:  # None: a handler not set from Python; Python's own is the closest
            signal.signal(signal.SIGINT, signal.default_int_handler if previous is None
                          else previous)
    return FitResult(loop.history, loop.step, loop.best, loop.best_step, stopped)


# -- a trainer's configuration ---------------------------------------------------------------

#: TrainConfig's fields as old checkpoints record them, one flat dict, with the defaults the
#: fields a checkpoint predates took (read by :meth:`TrainConfig.from_record`)
FLAT_TRAIN_CONFIG = {"batch_size": 128, "lr": 1e-3, "min_lr": 5e-5, "weight_decay": 0.05,
                     "warmup_steps": 500, "total_steps": 100_000, "grad_clip": 1.0,
                     "bf16": True, "eval_every": 1000, "checkpoint_every_s": 300.0,
                     "max_time_s": None, "stop_at_step": None, "decay_by_time": False,
                     "seed": 0, "device": "cpu", "select_metric": "accuracy",
                     "patience": None}
#: what the flat record's own fields are called in the loop (the rest keep their names)
_FLAT_RENAMED = {"select_metric": "metric"}


@dataclass
class TrainConfig:
    """How a trainer trains (:func:`unmask.training.mdm.train` an MDM, and the other trainers
    over :func:`fit`):
    the ``loop`` :func:`fit` runs, and what each step needs besides it.

    loop: schedule, evaluation, budgets, checkpoints; its ``batch_size`` (required) is the
        rows of every step and its ``metric`` the one that picks the best weights.
    weight_decay: AdamW's (:func:`adamw`: on the weight matrices only).
    bf16: the forward pass under bfloat16 autocast.
    seed: of the training batches (the weights' initialisation is the caller's to seed).
    device: where the model trains.
    """

    loop: LoopConfig
    weight_decay: float = 0.05
    bf16: bool = True
    seed: int = 0
    device: str = "cpu"

    #: fields a resumed run may change, besides the loop's: where it runs
    RUN_FIELDS: ClassVar[tuple[str, ...]] = ("device",)

    def __post_init__(self):
        require(isinstance(self.loop, LoopConfig), "loop: must be a LoopConfig")
        bs = self.loop.batch_size
        require(bs is not None and bs >= 1, f"loop.batch_size: must be >= 1, got {bs}")

    def run_fields(self) -> tuple[str, ...]:
        """What a resumed run may change: the device and the loop's run fields."""
        return self.RUN_FIELDS + tuple(f"loop.{f}" for f in self.loop.run_fields())

    @classmethod
    def from_record(cls, saved: dict) -> TrainConfig:
        """The configuration a checkpoint records: ``{"loop": {...}, ...}``, or the one flat
        dict of every field that older checkpoints hold (:data:`FLAT_TRAIN_CONFIG`, whose
        loop picked the highest ``select_metric``)."""
        if "loop" in saved:
            loop = saved["loop"]
            if not isinstance(loop, dict):
                raise TypeError("loop: not a dict")
            return cls(loop=LoopConfig(**loop), **{k: v for k, v in saved.items()
                                                   if k != "loop"})
        flat = {**FLAT_TRAIN_CONFIG, **saved}
        unknown = set(flat) - set(FLAT_TRAIN_CONFIG)
        if unknown:
            raise TypeError(f"unknown fields {sorted(unknown)}")
        own = {f.name for f in dataclasses.fields(cls)} - {"loop"}
        loop = {_FLAT_RENAMED.get(k, k): v for k, v in flat.items() if k not in own}
        return cls(loop=LoopConfig(higher_is_better=True, **loop),
                   **{k: v for k, v in flat.items() if k in own})
