"""Training the MI estimator on ground-truth label sets, as a step/evaluation pair over
:func:`unmask.training.loop.fit`.

The MDM is frozen, so its hidden states are computed once per context and kept
(:func:`~unmask.mi.estimator_eval.compute_features`); an epoch then costs only the estimator's
own passes. Loss: squared error over the ordered pairs (i, j), i != j, of masked positions
(:mod:`unmask.mi.estimator_losses`). Contexts are split into train / held-out by their group
(:func:`unmask.metrics.held_out_mask`). Training stops early when the held-out loss has not
improved for ``patience`` evaluations; ``out/best/`` holds the best estimator,
``out/checkpoint.pt`` the state to resume from.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import numpy as np
import torch

from unmask.errors import UnmaskError, require
from unmask.metrics import held_out_mask
from unmask.mi.estimator import MIEstimator
from unmask.mi.estimator_losses import LOSS_SCALES, held_out_loss, pair_mse, pair_rank_loss
from unmask.mi.label_set import LabelSet
from unmask.training.loop import LoopConfig, adamw, fit

__all__ = ["EstimatorTrainConfig", "augmented_training_set", "planned_steps", "train_estimator"]


@dataclass
class EstimatorTrainConfig:
    """Training settings.

    eval_every: optimiser steps between held-out evaluations (0 = once per epoch).
    patience: evaluations without a held-out improvement before stopping.
    held_out: share of groups (puzzles) held out; split_seed picks which.
    augment: symmetry copies per training context (see :func:`augmented_training_set`;
        the held-out contexts are never moved).
    loss_scale: what the squared error compares: MI in 'nats', 'sqrt' or 'log' of it (see
        :func:`to_loss_scale`); the held-out loss that picks the best estimator uses the
        same scale.
    rank_weight: weight of a within-context ranking term added to the squared error (see
        :func:`pair_rank_loss`; 0 = plain MSE). Early stopping still uses the squared error.
    rank_samples: pairs of pairs drawn per context for that term.
    """

    batch_size: int = 16
    lr: float = 5e-3
    min_lr: float = 1e-4
    weight_decay: float = 0.01
    warmup_steps: int = 100
    max_epochs: int = 200
    eval_every: int = 0
    patience: int = 15
    held_out: float = 0.1
    split_seed: int = 0
    seed: int = 0
    grad_clip: float = 1.0
    max_time_s: float | None = None
    augment: int = 0
    loss_scale: str = "nats"
    rank_weight: float = 0.0
    rank_samples: int = 512

    #: the fields a resumed run may change (the time budget is per run)
    RUN_FIELDS: ClassVar[tuple[str, ...]] = ("max_time_s",)

    def __post_init__(self):
        require(self.batch_size >= 1, f"batch_size: must be >= 1, got {self.batch_size}")
        require(self.lr > 0 and self.min_lr >= 0, "lr, min_lr: must be positive")
        require(self.max_epochs >= 1, f"max_epochs: must be >= 1, got {self.max_epochs}")
        require(self.eval_every >= 0, f"eval_every: must be >= 0, got {self.eval_every}")
        require(self.patience >= 1, f"patience: must be >= 1, got {self.patience}")
        require(0.0 < self.held_out < 1.0, f"held_out: must be in (0, 1), got {self.held_out}")
        require(self.augment >= 0, f"augment: must be >= 0, got {self.augment}")
        require(self.rank_weight >= 0, f"rank_weight: must be >= 0, got {self.rank_weight}")
        require(self.rank_samples >= 1, f"rank_samples: must be >= 1, got {self.rank_samples}")
        require(self.loss_scale in LOSS_SCALES, f"loss_scale: expected one of "
                f"{', '.join(LOSS_SCALES)}, got {self.loss_scale!r}")


def planned_steps(labels: LabelSet, cfg: EstimatorTrainConfig) -> int:
    """Optimiser steps of a run that is not stopped early: max_epochs x batches per epoch
    (``labels`` as passed to :func:`train_estimator`, copies included)."""
    n_train = int((~held_out_mask(labels.groups, cfg.held_out, cfg.split_seed)).sum())
    return cfg.max_epochs * math.ceil(n_train / cfg.batch_size)


def augmented_training_set(labels: LabelSet, cfg: EstimatorTrainConfig, symmetries
                           ) -> LabelSet:
    """``labels`` followed by ``cfg.augment`` symmetry copies of each of its *training*
    contexts (``symmetries(count, seed) -> (cell_perm, token_map)``, see
    :class:`unmask.mi.labels.ContextTask`). Copies keep their original's group, so they land on
    the training side of the same split; the held-out contexts stay the probed ones."""
    if not cfg.augment:
        return labels
    if symmetries is None:
        raise UnmaskError("augment: the labels' task has no known symmetry")
    train_idx = (~held_out_mask(labels.groups, cfg.held_out, cfg.split_seed)).nonzero()[:, 0]
    index = train_idx.repeat(cfg.augment)
    cell_perm, token_map = symmetries(len(index), cfg.seed)
    copies = labels.moved(index, cell_perm, token_map)
    return LabelSet(torch.cat([labels.tokens, copies.tokens]), torch.cat([labels.mi, copies.mi]),
                    torch.cat([labels.groups, copies.groups]), labels.model_fingerprint,
                    labels.identity)


def train_estimator(estimator: MIEstimator, hidden: torch.Tensor, labels: LabelSet,
                    mask_id: int, cfg: EstimatorTrainConfig, out_dir: str | Path, *,
                    resume: bool = False, override: bool = False, overwrite: bool = False,
                    log: Callable[[str], None] = print,
                    progress: Callable[[int, int], None] | None = None,
                    extra: dict | None = None, data: dict | None = None) -> dict:
    """Train ``estimator`` on stored ``hidden`` (M, N, D) states of the labelled contexts.

    out_dir/checkpoint.pt: estimator, optimiser, step, best, history (for ``resume``; another
        estimator configuration is refused, other training settings or ``data`` (what the
        labels are) unless ``override``).
    out_dir/best/: the estimator with the lowest held-out loss (MIEstimator.save).
    out_dir/history.jsonl: one line per evaluation, the first the untrained head's.
    progress(step, total_steps) is called after every step. Batches are a pure function of
    (seed, step), so a resumed run sees the batches an uninterrupted one would have.
    Returns {"best_loss", "best_step", "steps", "stopped", "history"}; ``stopped`` is
    'max_epochs', 'early_stopping' or 'max_time'.
    """
    require(len(hidden) == len(labels),
            f"hidden: {len(hidden)} contexts for {len(labels)} labelled contexts")
    out = Path(out_dir)
    masked_all = labels.tokens == mask_id
    held = held_out_mask(labels.groups, cfg.held_out, cfg.split_seed)
    train_idx, held_idx = (~held).nonzero().squeeze(1), held.nonzero().squeeze(1)
    if len(train_idx) == 0 or len(held_idx) == 0:
        raise UnmaskError(f"labels: {len(labels)} contexts are too few to hold out "
                          f"{cfg.held_out:.0%} and still train")
    h_held, mi_held, m_held = hidden[held_idx], labels.mi[held_idx], masked_all[held_idx]
    per_epoch = math.ceil(len(train_idx) / cfg.batch_size)
    loop = LoopConfig(total_steps=cfg.max_epochs * per_epoch, lr=cfg.lr, min_lr=cfg.min_lr,
                      warmup_steps=cfg.warmup_steps, eval_every=cfg.eval_every or per_epoch,
                      metric="held_out_loss", patience=cfg.patience, max_time_s=cfg.max_time_s,
                      grad_clip=cfg.grad_clip, steps_per_epoch=per_epoch, evaluate_at_start=True)

    def step(i: int) -> torch.Tensor:
        epoch, k = divmod(i, per_epoch)
        perm = torch.from_numpy(np.random.default_rng([cfg.seed, epoch])
                                .permutation(len(train_idx)))
        idx = train_idx[perm[k * cfg.batch_size:(k + 1) * cfg.batch_size]]
        masked = masked_all[idx]
        pred = estimator(hidden[idx].float(), masked)
        loss = pair_mse(pred, labels.mi[idx], masked, cfg.loss_scale)
        if cfg.rank_weight:
            gen = torch.Generator().manual_seed(cfg.seed * 1_000_003 + i)
            loss = loss + cfg.rank_weight * pair_rank_loss(pred, labels.mi[idx], masked,
                                                           cfg.rank_samples, gen)
        return loss

    def evaluate(_) -> dict:
        return {"held_out_loss": held_out_loss(estimator, h_held, mi_held, m_held,
                                               scale=cfg.loss_scale)}

    def save_best(record: dict, meta: dict) -> None:
        estimator.save(out / "best", extra={
            "train": record, **(extra or {}),
            "split": {"held_out": cfg.held_out, "split_seed": cfg.split_seed,
                      "train_contexts": len(train_idx), "held_out_contexts": len(held_idx)}})

    res = fit(step, evaluate, loop, out, model=estimator, optimizer=adamw(
                  estimator, cfg.lr, cfg.weight_decay), save_best=save_best, resume=resume,
                      overwrite=overwrite,
              override=override, identity={"estimator_config": estimator.config},
              settings={"train_config": cfg, **({"data": data} if data is not None else {})},
              weights_key="estimator", log=log,
              progress=None if progress is None else lambda s, _: progress(s, loop.total_steps))
    stopped = "max_epochs" if res.stopped == "total_steps" else res.stopped
    return {"best_loss": res.best, "best_step": res.best_step, "steps": res.steps,
            "stopped": stopped, "history": res.history}
