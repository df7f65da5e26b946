"""The protein context task of MI labels (:mod:`unmask.mi.labels`): crops of held-out proteins
with random residues masked."""

from __future__ import annotations

import torch

from unmask.mi.labels import ContextTask, register_task
from unmask.models.auto import load_model
from unmask.models.base import MaskedModel
from unmask.protein.data import label_contexts
from unmask.protein.model import check_protein_model, load_protein_model


def _protein_contexts(seed: int, start: int, count: int,
                      mask_ratio: tuple[float, float]) -> torch.Tensor:
    return label_contexts(seed, start, count, mask_ratio)


def _check_protein_model(model: MaskedModel) -> None:
    check_protein_model(model)


def _load_protein_model(name_or_path: str | None, trust_remote_code: bool = False
                        ) -> MaskedModel:
    if not trust_remote_code:
        return load_protein_model(name_or_path)
    model = load_model(name_or_path, task="protein", trust_remote_code=True)
    check_protein_model(model)
    return model


LABEL_TASK = register_task(ContextTask(
    "protein", _protein_contexts, _check_protein_model, _load_protein_model,
    "crops (50-100 residues) of held-out proteins, random residues masked, PAD after the crop"))
