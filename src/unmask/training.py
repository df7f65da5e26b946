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
    seed: int = 0
    device: str = "cpu"
    select_metric: str = "accuracy"

    def __post_init__(self):
        require(self.batch_size >= 1, f"batch_size: must be >= 1, got {self.batch_size}")
        require(self.lr > 0 and self.min_lr >= 0, "lr, min_lr: must be positive")
        require(self.total_steps >= 1, f"total_steps: must be >= 1, got {self.total_steps}")
        require(self.eval_every >= 1, f"eval_every: must be >= 1, got {self.eval_every}")

    def lr_at(self, step: int) -> float:
        if step < self.warmup_steps:
            return self.lr * (step + 1) / self.warmup_steps
        frac = min(1.0, (step - self.warmup_steps) / max(1, self.total_steps - self.warmup_steps))
        return self.min_lr + 0.5 * (self.lr - self.min_lr) * (1 + math.cos(math.pi * frac))


def masked_cross_entropy(model: MDMTransformer, inputs: torch.Tensor, targets: torch.Tensor,
                         loss_mask: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy over masked positions, restricted to real tokens."""
    logits = model(inputs).logits
    logits = logits.masked_fill(~model.real_token_mask.to(logits.device), -torch.inf)
    return F.cross_entropy(logits[loss_mask], targets[loss_mask])


def train(model: MDMTransformer, batch_fn: BatchFn, cfg: TrainConfig, out_dir: str | Path,
          evaluate: EvalFn | None = None, *, resume: bool = False, log=print,
          progress: Callable[[int, dict], None] | None = None) -> list[dict]:
    """Train ``model`` in place; checkpoints and the best weights go under ``out_dir``.

    out_dir/checkpoint.pt: model, optimiser, step, history (for --resume).
    out_dir/best/: the weights with the best ``cfg.select_metric`` so far (save_pretrained).
    out_dir/history.jsonl: one line per evaluation.
    Returns the evaluation history.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    device = torch.device(cfg.device)
    model.to(device)
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": cfg.weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}], lr=cfg.lr,
                            betas=(0.9, 0.98))
    step, history, best = 0, [], -math.inf
    ckpt = out / "checkpoint.pt"
    if resume:
        if not ckpt.is_file():
            raise UnmaskError(f"resume: no checkpoint at {ckpt}")
        state = torch.load(ckpt, map_location=device, weights_only=False)
        if state["model_config"] != asdict(model.config):
            raise UnmaskError(f"resume: {ckpt} was written for another model configuration")
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
        step, history, best = state["step"], state["history"], state["best"]
        log(f"resumed at step {step} ({step * cfg.batch_size:,} samples), best {best:.4f}")

    def save_checkpoint():
        with atomic_path(ckpt) as tmp:
            torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(),
                        "step": step, "history": history, "best": best,
                        "model_config": asdict(model.config), "train_config": asdict(cfg)}, tmp)

    start = time.time()
    last_ckpt = start
    running = None
    t_window, n_window = time.time(), 0
    while step < cfg.total_steps:
        if cfg.max_time_s is not None and time.time() - start > cfg.max_time_s:
            break
        if cfg.stop_at_step is not None and step >= cfg.stop_at_step:
            break
        model.train()
        inputs, targets, loss_mask = (t.to(device) for t in batch_fn(step, cfg.batch_size))
        for g in opt.param_groups:
            g["lr"] = cfg.lr_at(step)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=cfg.bf16):
            loss = masked_cross_entropy(model, inputs, targets, loss_mask)
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
            rate = n_window / max(1e-9, time.time() - t_window)
            t_window, n_window = time.time(), 0
            metrics = {"step": step, "samples": step * cfg.batch_size, "loss": running,
                       "lr": cfg.lr_at(step), "samples_per_s": round(rate, 1),
                       "wall_s": round(time.time() - start, 1)}
            if evaluate is not None:
                model.eval()
                metrics.update(evaluate(model))
                score = metrics.get(cfg.select_metric, -math.inf)
                if score > best:
                    best = score
                    model.save_pretrained(out / "best", extra={"train": metrics})
                    metrics["best"] = True
            history.append(metrics)
            with open(out / "history.jsonl", "a") as f:
                f.write(json.dumps(metrics) + "\n")
            log(" ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}"
                         for k, v in metrics.items()))
            save_checkpoint()
            last_ckpt = time.time()
        elif time.time() - last_ckpt > cfg.checkpoint_every_s:
            save_checkpoint()
            last_ckpt = time.time()
    save_checkpoint()
    return history
