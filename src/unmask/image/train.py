"""Training the digits MDM: held-out masked cross-entropy selects the weights."""

from __future__ import annotations

from pathlib import Path

import torch
import torch.nn.functional as F

from unmask.image.data import DigitSplit, training_batch
from unmask.models.transformer import MDMTransformer
from unmask.training.loop import TrainConfig
from unmask.training.mdm import train

#: the metric :func:`train_image_mdm` selects weights by (higher is better)
SELECT_METRIC = "heldout_score"


def heldout_loss(model: MDMTransformer, heldout: DigitSplit, repeats: int = 4,
                 seed: int = 99) -> float:
    """Mean masked-pixel cross-entropy (nats) on the held-out images, ``repeats`` random
    maskings each (the same maskings on every call)."""
    tokens = heldout.tokens().repeat(repeats, 1)
    # the maskings of a training batch, applied to every held-out row in turn
    _, _, mask = training_batch(tokens, 0, len(tokens), model.mask_id, seed=seed)
    inputs, targets = tokens.masked_fill(mask, model.mask_id), tokens
    with torch.inference_mode():
        logits = model(inputs).logits
    logits = logits.masked_fill(~model.real_token_mask, -torch.inf)
    return float(F.cross_entropy(logits[mask], targets[mask]))


def train_image_mdm(model: MDMTransformer, train_part: DigitSplit, heldout: DigitSplit,
                    cfg: TrainConfig, out: str | Path, *, resume: bool = False,
                    overwrite: bool = False,
                    log=print) -> list[dict]:
    """Train ``model`` on ``train_part`` with :func:`unmask.training.mdm.train`; OUT/best holds the
    weights with the lowest held-out masked cross-entropy. Returns the evaluation history."""
    tokens = train_part.tokens()

    def evaluate(m: MDMTransformer) -> dict:
        loss = heldout_loss(m, heldout)
        return {SELECT_METRIC: -loss, "heldout_loss": loss}

    return train(model, lambda step, bs: training_batch(tokens, step, bs, model.mask_id,
                                                        seed=cfg.seed),
                 cfg, out, evaluate, resume=resume, overwrite=overwrite, log=log)
