"""The protein MDM: our transformer over protein tokens, reading PAD as given context."""

from __future__ import annotations

import numpy as np
import torch

from unmask.errors import require
from unmask.models.base import MaskedModel
from unmask.models.transformer import MDMTransformer, TransformerConfig
from unmask.protein.data import CropSampler
from unmask.protein.tokens import (
    AMINO_ACIDS,
    MASK_ID,
    MAX_LENGTH,
    PAD_ID,
    VOCAB_SIZE,
    check_padded_tokens,
)

TASK = "protein"


def protein_model_config(**overrides) -> TransformerConfig:
    """The shipped protein architecture: 4 layers, d=128, learned positions over 100 slots
    (about 0.8M parameters, 3.2 MB of float32 weights)."""
    base = dict(vocab_size=VOCAB_SIZE, mask_id=MASK_ID, max_length=MAX_LENGTH,
                real_token_ids=list(range(len(AMINO_ACIDS))), d_model=128, n_layers=4,
                n_heads=4, d_ff=512, position="learned", task=TASK)
    base.update(overrides)
    return TransformerConfig(**base)


class ProteinMDM(MDMTransformer):
    """:class:`MDMTransformer` whose inputs may end in PAD (the given length)."""

    def check_tokens(self, tokens: torch.Tensor) -> None:
        check_padded_tokens(tokens, super().check_tokens)


def check_protein_model(model: MaskedModel) -> None:
    """Raise unless ``model`` reads protein tokens (20 residues, MASK 20, PAD 21)."""
    ok = (getattr(model, "vocab_size", None) == VOCAB_SIZE and model.mask_id == MASK_ID
          and tuple(model.real_token_ids) == tuple(range(len(AMINO_ACIDS))))
    require(ok, "model: expected a protein model (20 amino acids, MASK 20, PAD 21)")


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
    from unmask.decode import real_log_probs

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


__all__ = ["PAD_ID", "ProteinMDM", "check_protein_model", "heldout_eval_set",
           "masked_loss", "protein_model_config"]
