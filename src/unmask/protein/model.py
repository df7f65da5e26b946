"""The protein MDM: our transformer over the protein vocabulary (:mod:`unmask.protein.tokens`),
reading PAD as given context (the length is given, not generated), and its loader."""

from __future__ import annotations

import os
from pathlib import Path

import torch

from unmask.errors import require
from unmask.models.auto import load_model
from unmask.models.base import MaskedModel
from unmask.models.esm import EsmMaskedModel
from unmask.models.transformer import MDMTransformer, TransformerConfig
from unmask.protein.tokens import (
    AMINO_ACIDS,
    MASK_ID,
    MAX_LENGTH,
    PAD_ID,
    PROTEIN_RESIDUES,
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
    """:class:`MDMTransformer` whose inputs may end in PAD (the given length); it reads
    residue templates."""

    residues = PROTEIN_RESIDUES

    def check_tokens(self, tokens: torch.Tensor) -> None:
        check_padded_tokens(tokens, super().check_tokens)


def check_protein_model(model: MaskedModel) -> None:
    """Raise unless ``model`` reads protein tokens (20 residues, MASK 20, PAD 21)."""
    ok = (getattr(model, "vocab_size", None) == VOCAB_SIZE and model.mask_id == MASK_ID
          and tuple(model.real_token_ids) == tuple(range(len(AMINO_ACIDS))))
    require(ok, "model: expected a protein model (20 amino acids, MASK 20, PAD 21)")


def load_esm_folder(path: Path, meta: dict | None = None) -> EsmMaskedModel:
    """An ESM checkpoint folder (``meta``: its config.json, read by the caller) as a model of
    protein tokens (:class:`unmask.models.esm.EsmMaskedModel` over
    :data:`~unmask.protein.tokens.PROTEIN_RESIDUES`): how
    :func:`unmask.models.auto.load_model` loads one."""
    model = EsmMaskedModel.from_pretrained(path, residues=PROTEIN_RESIDUES, task=TASK,
                                           meta=meta)
    check_protein_model(model)
    return model


def load_folder(path: Path, meta: dict | None = None) -> ProteinMDM:
    """The protein MDM of a model folder (``config.json`` of kind ``mdm-transformer``, task
    protein; ``meta``: its content, read by the caller), checked to read protein tokens: how
    :func:`unmask.models.auto.load_model` loads one."""
    model = ProteinMDM.from_pretrained(path, meta=meta)
    check_protein_model(model)
    return model


def load_protein_model(name_or_path: str | os.PathLike | None = None) -> MaskedModel:
    """:func:`load_model` for the protein task (default: the shipped protein MDM); also
    refuses a model that records no task but does not read protein tokens."""
    model = load_model(name_or_path, task="protein")
    check_protein_model(model)
    return model


__all__ = ["PAD_ID", "TASK", "ProteinMDM", "check_protein_model", "load_folder",
           "load_protein_model", "protein_model_config"]
