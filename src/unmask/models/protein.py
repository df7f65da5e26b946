"""The protein model layer: the protein vocabulary (20 standard amino acids, MASK, PAD) and the
protein MDM, our transformer over it reading PAD as given context.

Length is given, not generated: a protein of length L lives in a fixed-width row of
``max_length`` tokens whose first L positions are the residues and whose remaining positions
are PAD, an input-only token (see :mod:`unmask.protein.tokens`).
"""

from __future__ import annotations

import torch

from unmask.errors import UnmaskError, require
from unmask.models.base import MaskedModel
from unmask.models.transformer import MDMTransformer, TransformerConfig

AMINO_ACIDS = "ACDEFGHIKLMNPQRSTVWY"
MASK_ID = 20
PAD_ID = 21
VOCAB_SIZE = 22
MAX_LENGTH = 100


def check_padded_tokens(tokens: torch.Tensor, check_rest) -> None:
    """Validate (B, N) protein tokens: PAD only as a suffix, everything else checked by
    ``check_rest`` (the model's own check) with PAD read as MASK."""
    if isinstance(tokens, torch.Tensor) and tokens.dim() == 2 and tokens.numel():
        pad = tokens == PAD_ID
        # a PAD followed by a non-PAD would put a residue after the protein's end
        if bool((pad[:, :-1] & ~pad[:, 1:]).any()):
            raise UnmaskError("tokens: PAD must only follow the residues (a suffix of each row)")
        tokens = tokens.masked_fill(pad, MASK_ID)
    check_rest(tokens)


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


__all__ = ["AMINO_ACIDS", "MASK_ID", "MAX_LENGTH", "PAD_ID", "TASK", "VOCAB_SIZE", "ProteinMDM",
           "check_padded_tokens", "check_protein_model", "protein_model_config"]
