"""The MDM's training over the loop (:func:`unmask.training.loop.fit`): the absorbing-mask
forward process on a batch (:func:`mask_batch`), the masked cross-entropy, and :func:`train`,
which trains an :class:`~unmask.models.transformer.MDMTransformer` and keeps its best weights
as a model folder."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from unmask.models.transformer import MDMTransformer
from unmask.probs import previous_pass_probs, real_log_probs
from unmask.training.loop import TrainConfig, adamw, fit, plain_record

#: (step, batch_size) -> (inputs (B, N) with MASK, targets (B, N), loss_mask (B, N) bool)
BatchFn = Callable[[int, int], tuple[torch.Tensor, torch.Tensor, torch.Tensor]]
#: model -> metrics dict; must contain the key named by LoopConfig.metric
EvalFn = Callable[[MDMTransformer], dict]


def mask_batch(targets: torch.Tensor, ratio: np.ndarray, draw: np.ndarray, mask_id: int,
               eligible: np.ndarray | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """The absorbing-mask forward process on a training batch (diffusers' ``add_noise`` for
    an MDM): each eligible position whose uniform ``draw`` falls below its row's ``ratio`` is
    masked, and at least one per row (the eligible position of least draw), so every row
    has a loss term.

    Args:
        targets: (B, N) clean token ids.
        ratio: (B, 1) mask ratio t per row, in (0, 1].
        draw: (B, N) uniforms in [0, 1).
        mask_id: the MASK token id.
        eligible: (B, N) bool, positions that may be masked (None: all).
    Returns:
        (inputs (B, N) with MASK at the masked positions, loss_mask (B, N) bool).
    """
    eligible = np.ones(draw.shape, dtype=bool) if eligible is None else eligible
    masked = (draw < ratio) & eligible
    first = np.argmin(np.where(eligible, draw, np.inf), axis=1)
    masked[np.arange(len(draw)), first] = True
    loss_mask = torch.from_numpy(masked)
    return targets.masked_fill(loss_mask, mask_id), loss_mask


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
          evaluate: EvalFn | None = None, *, resume: bool = False, override: bool = False,
          overwrite: bool = False,
          log=print, progress: Callable[[int, float], None] | None = None,
          origin: dict | None = None, data: dict | None = None,
          on_best: Callable[[Path], None] | None = None) -> list[dict]:
    """Train ``model`` in place with :func:`fit`; checkpoints and the best weights go under
    ``out_dir``.

    out_dir/checkpoint.pt: model, optimiser, step, history (for ``resume``).
    out_dir/best/: the weights with the best ``cfg.loop.metric`` so far (save_pretrained);
        with ``origin`` (what the run started from: a parent model, extra data), its config
        records it under "origin", so a fine-tuned model says what it was grown from. A resumed
        run keeps the origin its checkpoint recorded.
    out_dir/history.jsonl: one line per evaluation.
    data: what the batches are drawn from (pool size, mixture, ...), compared on resume with
        ``cfg`` (see :func:`fit`'s ``settings``; ``override`` lets them differ).
    on_best: called with out_dir/best after each save there (files that go with the weights).
    Returns the evaluation history.
    """
    out = Path(out_dir)
    device = torch.device(cfg.device)
    model.to(device)
    opt = adamw(model, cfg.loop.lr, cfg.weight_decay, betas=(0.9, 0.98))

    def step(i: int) -> torch.Tensor:
        inputs, targets, loss_mask = (t.to(device) for t in batch_fn(i, cfg.loop.batch_size))
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=cfg.bf16):
            # a self-conditioning model learns with and without a previous pass, alternately
            return masked_cross_entropy(model, inputs, targets, loss_mask,
                                        self_condition=model.self_conditioning and i % 2 == 1)

    def save_best(record: dict, meta: dict) -> None:
        origin = meta.get("origin")
        model.save_pretrained(out / "best", extra={"train": plain_record(record),
                                                   **({"origin": origin} if origin else {})})
        if on_best is not None:
            on_best(out / "best")

    settings = {"train_config": cfg, **({"data": data} if data is not None else {})}
    return fit(step, evaluate, cfg.loop, out, model=model, optimizer=opt,
               save_best=save_best, resume=resume, override=override, overwrite=overwrite,
               identity={"model_config": model.config}, settings=settings,
               meta={"origin": origin}, log=log, progress=progress).history
