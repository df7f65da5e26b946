"""Training helpers of the protein MDM (:mod:`unmask.protein.model`): held-out set, loss."""

from __future__ import annotations

import numpy as np
import torch

from unmask.models.base import MaskedModel
from unmask.probs import real_log_probs
from unmask.protein.data import CropSampler
from unmask.protein.tokens import AMINO_ACIDS, MASK_ID, MAX_LENGTH


def heldout_eval_set(sampler: CropSampler, n: int = 512, seed: int = 0
                     ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """A fixed evaluation set: (inputs, targets, masked), each (n, MAX_LENGTH); mask ratios
    evenly spread over (0, 1) so every stage of decoding is weighed."""
    rng = np.random.default_rng([seed, 31337])
    targets, crop = sampler.crops(rng.integers(50, 101, n), rng)
    ratio = (np.arange(n) + 0.5) / n
    inside = np.arange(MAX_LENGTH)[None, :] < crop.numpy()[:, None]
    masked = (rng.uniform(size=(n, MAX_LENGTH)) < ratio[:, None]) & inside
    masked[np.arange(n), 0] = True
    mask_t = torch.from_numpy(masked)
    return targets.masked_fill(mask_t, MASK_ID), targets, mask_t


def masked_loss(model: MaskedModel, inputs: torch.Tensor, targets: torch.Tensor,
                masked: torch.Tensor, batch_size: int = 256) -> dict:
    """Mean cross-entropy (nats) and accuracy of ``model`` on the masked positions."""

    real = model.real_token_mask
    nll, hit, count = 0.0, 0, 0
    with torch.inference_mode():
        for i in range(0, len(inputs), batch_size):
            x, y, m = inputs[i:i + batch_size], targets[i:i + batch_size], masked[i:i + batch_size]
            lp = real_log_probs(model(x).logits, real.to(x.device))
            y = y.clamp(max=len(AMINO_ACIDS) - 1)  # PAD targets sit outside m anyway
            tok = lp.gather(-1, y[..., None]).squeeze(-1)
            nll -= float(tok[m].double().sum())
            hit += int((lp.argmax(-1) == y)[m].sum())
            count += int(m.sum())
    return {"heldout_loss": nll / count, "heldout_acc": hit / count}


__all__ = ["heldout_eval_set", "masked_loss"]
