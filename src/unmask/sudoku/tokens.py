"""Token convention of Sudoku MDMs: token = digit - 1 (0..8), MASK = 9, vocabulary of 10."""

from __future__ import annotations

import numpy as np
import torch

from unmask.errors import UnmaskError
from unmask.sudoku.grids import as_grids

MASK_ID = 9
VOCAB_SIZE = 10
NUM_CELLS = 81


def grid_to_tokens(grids) -> torch.Tensor:
    """Grids (..., 81) with 0 = blank, 1..9 = digits (numpy or torch), or puzzle strings as the
    command line reads them (81 characters, 0 or . for blanks; one, or a list: (81,) or
    (B, 81) tokens) -> torch.long tokens, blanks becoming MASK_ID. A torch input keeps its
    device and shape."""
    if isinstance(grids, torch.Tensor):
        g = grids.long()
    else:
        arr, single = as_grids(grids)
        g = torch.from_numpy(arr[0] if single else arr).long()
    if g.shape[-1] != NUM_CELLS:
        raise ValueError(f"grids must end in {NUM_CELLS} cells, got shape {tuple(g.shape)}")
    if g.numel() and (g.min() < 0 or g.max() > 9):
        raise ValueError("grid values must be 0 (blank) or digits 1..9")
    return torch.where(g == 0, torch.full_like(g, MASK_ID), g - 1)


def tokens_to_grid(tokens) -> np.ndarray:
    """Tokens (..., 81) in 0..9 (numpy or torch) -> np.int8 grids, MASK_ID becoming 0."""
    if isinstance(tokens, torch.Tensor):
        t = tokens.detach().to("cpu").numpy()
    else:
        t = np.asarray(tokens if isinstance(tokens, (list, tuple, np.ndarray)) else None)
    if t.dtype.kind not in "iu" or t.ndim == 0:
        raise UnmaskError(f"tokens: expected token ids 0..{MASK_ID} of shape (..., 81) "
                          f"(numpy or torch), got {type(tokens).__name__}")
    if t.shape[-1] != NUM_CELLS:
        raise ValueError(f"tokens must end in {NUM_CELLS} cells, got shape {t.shape}")
    if t.size and (t.min() < 0 or t.max() > MASK_ID):
        raise ValueError(f"token ids must be in 0..{MASK_ID}")
    return np.where(t == MASK_ID, 0, t + 1).astype(np.int8)
