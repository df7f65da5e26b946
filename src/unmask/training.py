"""Training an MDM: masked-token cross-entropy, AdamW + warmup/cosine, checkpoint and resume.

Batches are a pure function of (seed, step), so a resumed run sees exactly the batches an
uninterrupted run would have seen.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
import torch.nn.functional as F

from unmask.decode import previous_pass_probs, real_log_probs
from unmask.errors import UnmaskError, require
from unmask.io import atomic_path
from unmask.models.transformer import MDMTransformer

#: (step, batch_size) -> (inputs (B, N) with MASK, targets (B, N), loss_mask (B, N) bool)
BatchFn = Callable[[int, int], tuple[torch.Tensor, torch.Tensor, torch.Tensor]]
#: model -> metrics dict; must contain the key named by TrainConfig.select_metric
EvalFn = Callable[[MDMTransformer], dict]


@dataclass
class TrainConfig:
    batch_size: int = 128
    lr: float = 1e-3
    min_lr: float = 5e-5
    weight_decay: float = 0.05
    warmup_steps: int = 500
    total_steps: int = 100_000
    grad_clip: float = 1.0
    bf16: bool = True
    eval_every: int = 1000
    checkpoint_every_s: float = 300.0
    max_time_s: float | None = None
    stop_at_step: int | None = None  # pause here (resume later) without changing the schedule
    # with max_time_s: the cosine reaches min_lr when either budget, steps or time (counted over
    # resumes), runs out, so a run whose speed is unknown in advance still ends its schedule
    decay_by_time: bool = False
    seed: int = 0
    device: str = "cpu"
    select_metric: str = "accuracy"

    def __post_init__(self):
        require(self.batch_size >= 1, f"batch_size: must be >= 1, got {self.batch_size}")
        require(self.lr > 0 and self.min_lr >= 0, "lr, min_lr: must be positive")
        require(self.total_steps >= 1, f"total_steps: must be >= 1, got {self.total_steps}")
        require(self.eval_every >= 1, f"eval_every: must be >= 1, got {self.eval_every}")
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


def warmup_cosine_lr(step: int, lr: float, min_lr: float, warmup_steps: int,
                     total_steps: int) -> float:
    """Linear warmup to ``lr`` over ``warmup_steps``, then cosine decay to ``min_lr`` at
    ``total_steps`` (the schedule of every training loop here)."""
    if step < warmup_steps:
        return lr * (step + 1) / warmup_steps
    frac = min(1.0, (step - warmup_steps) / max(1, total_steps - warmup_steps))
    return min_lr + 0.5 * (lr - min_lr) * (1 + math.cos(math.pi * frac))


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


def saved_config(cls, saved: dict | None):
    """``cls(**saved)``: a config dataclass recorded as a dict, read back with the defaults of
    the fields it predates; None when ``saved`` is missing or is not a valid ``cls``."""
    try:
        return cls(**saved) if isinstance(saved, dict) else None
    except (TypeError, UnmaskError):
        return None


def load_checkpoint(path: Path, device, must_match: dict) -> dict:
    """Read a checkpoint for ``--resume``; :class:`UnmaskError` when there is none, or when
    one of ``must_match`` (key -> (expected config dataclass, what it is)) differs from the
    config it records. The record is compared as that dataclass (:func:`saved_config`), so a
    checkpoint written before a field with a default was added still matches under that
    default."""
    if not path.is_file():
        raise UnmaskError(f"resume: no checkpoint at {path}")
    state = torch.load(path, map_location=device, weights_only=False)
    for key, (expected, what) in must_match.items():
        if saved_config(type(expected), state.get(key)) != expected:
            raise UnmaskError(f"resume: {path} was written {what}")
    return state


def append_history(out: Path, history: list[dict], record: dict, log) -> None:
    """Append one evaluation ``record`` to ``history`` and to OUT/history.jsonl, and log it as
    one line of key=value pairs."""
    history.append(record)
    with open(out / "history.jsonl", "a") as f:
        f.write(json.dumps(record) + "\n")
    log(" ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}"
                 for k, v in record.items()))


def masked_cross_entropy(model: MDMTransformer, inputs: torch.Tensor, targets: torch.Tensor,
                         loss_mask: torch.Tensor, self_condition: bool = False) -> torch.Tensor:
    """Mean cross-entropy over masked positions, restricted to real tokens.

    self_condition: (self-conditioning models) first run a pass without gradient and give
    the model its predictions as the previous pass's beliefs; the loss is on the second pass.
    """
    prev = None
    if self_condition:
        with torch.no_grad():
            first = model(inputs).logits
        real = model.real_token_mask.to(first.device)
        prev = previous_pass_probs(real_log_probs(first, real).exp(), inputs == model.mask_id)
    logits = model(inputs, prev_probs=prev).logits
    logits = logits.masked_fill(~model.real_token_mask.to(logits.device), -torch.inf)
    return F.cross_entropy(logits[loss_mask], targets[loss_mask])


def train(model: MDMTransformer, batch_fn: BatchFn, cfg: TrainConfig, out_dir: str | Path,
          evaluate: EvalFn | None = None, *, resume: bool = False, log=print,
          progress: Callable[[int, dict], None] | None = None,
          origin: dict | None = None) -> list[dict]:
    """Train ``model`` in place; checkpoints and the best weights go under ``out_dir``.

    out_dir/checkpoint.pt: model, optimiser, step, history (for --resume).
    out_dir/best/: the weights with the best ``cfg.select_metric`` so far (save_pretrained);
        with ``origin`` (what the run started from: a parent model, extra data), its config
        records it under "origin", so a fine-tuned model says what it was grown from. A resumed
        run keeps the origin its checkpoint recorded.
    out_dir/history.jsonl: one line per evaluation.
    Returns the evaluation history.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    device = torch.device(cfg.device)
    model.to(device)
    opt = adamw(model, cfg.lr, cfg.weight_decay, betas=(0.9, 0.98))
    step, history, best = 0, [], -math.inf
    elapsed_before = 0.0  # training seconds of earlier runs of this checkpoint
    ckpt = out / "checkpoint.pt"
    if resume:
        state = load_checkpoint(ckpt, device, {"model_config": (
            model.config, "for another model configuration")})
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
        step, history, best = state["step"], state["history"], state["best"]
        origin = state.get("origin", origin)
        elapsed_before = state.get("elapsed_s", 0.0)
        log(f"resumed at step {step} ({step * cfg.batch_size:,} samples), best {best:.4f}")

    def checkpoint():
        save_checkpoint(ckpt, {"model": model.state_dict(), "optimizer": opt.state_dict(),
                               "step": step, "history": history, "best": best,
                               "model_config": asdict(model.config),
                               "train_config": asdict(cfg), "elapsed_s": elapsed(),
                               "origin": origin})

    start = time.time()
    last_ckpt = start

    def elapsed() -> float:
        return elapsed_before + time.time() - start

    running = None
    t_window, n_window = time.time(), 0

    def record():
        """Evaluate, keep the best weights, log a line of history and checkpoint."""
        nonlocal best, t_window, n_window
        rate = n_window / max(1e-9, time.time() - t_window)
        t_window, n_window = time.time(), 0
        metrics = {"step": step, "samples": step * cfg.batch_size, "loss": running,
                   "lr": cfg.lr_at(step, elapsed()), "samples_per_s": round(rate, 1),
                   "wall_s": round(time.time() - start, 1)}
        if evaluate is not None:
            model.eval()
            metrics.update(evaluate(model))
            score = metrics.get(cfg.select_metric, -math.inf)
            if score > best:
                best = score
                extra = {"train": metrics, **({"origin": origin} if origin else {})}
                model.save_pretrained(out / "best", extra=extra)
                metrics["best"] = True
        append_history(out, history, metrics, log)
        checkpoint()

    stopped_by_time = False
    while step < cfg.total_steps:
        # the time budget is this run's, or with decay_by_time the whole schedule's
        spent = elapsed() if cfg.decay_by_time else time.time() - start
        if cfg.max_time_s is not None and spent > cfg.max_time_s:
            stopped_by_time = True
            break
        if cfg.stop_at_step is not None and step >= cfg.stop_at_step:
            break
        model.train()
        inputs, targets, loss_mask = (t.to(device) for t in batch_fn(step, cfg.batch_size))
        for g in opt.param_groups:
            g["lr"] = cfg.lr_at(step, elapsed())
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=cfg.bf16):
            # a self-conditioning model learns with and without a previous pass, alternately
            loss = masked_cross_entropy(model, inputs, targets, loss_mask,
                                        self_condition=model.self_conditioning and step % 2 == 1)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
        opt.step()
        step += 1
        n_window += cfg.batch_size
        value = float(loss.detach())
        running = value if running is None else 0.98 * running + 0.02 * value
        if progress is not None:
            progress(step, {"loss": running})
        if step % cfg.eval_every == 0 or step == cfg.total_steps:
            record()
            last_ckpt = time.time()
        elif time.time() - last_ckpt > cfg.checkpoint_every_s:
            checkpoint()
            last_ckpt = time.time()
    if stopped_by_time and step and (not history or history[-1]["step"] != step):
        record()  # the steps since the last evaluation are part of the run's result
    checkpoint()
    return history
