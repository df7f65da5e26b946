"""The Sudoku context task of MI labels (:mod:`unmask.mi.labels`): fresh solution grids with
random cells masked, moved by the Sudoku symmetries."""

from __future__ import annotations

import numpy as np
import torch

from unmask.errors import require
from unmask.mi.labels import ContextTask, random_masks, register_task
from unmask.models.auto import load_model
from unmask.models.base import MaskedModel
from unmask.sudoku.datasets import training_grids
from unmask.sudoku.symmetry import sample_symmetry
from unmask.sudoku.tokens import MASK_ID, grid_to_tokens

# Keeps label grids apart from training grids drawn with small seeds and from the trainer's pool.
_SUDOKU_LABEL_SALT = 0x1ABE_15D0_0000_0000
_SUDOKU_MASK_KEY = 0x1ABE_3A5C


def sudoku_contexts(seed: int, start: int, count: int,
                    mask_ratio: tuple[float, float]) -> torch.Tensor:
    """(count, 81) Sudoku tokens: fresh solution grids (never a test-set solution, from a
    stream no training run draws) with a random share of cells masked."""

    grids = training_grids(count, seed=(int(seed) ^ _SUDOKU_LABEL_SALT), offset=start)
    masks = random_masks((_SUDOKU_MASK_KEY, int(seed)), start, count, 81, mask_ratio)
    return grid_to_tokens(grids).masked_fill(torch.from_numpy(masks), MASK_ID)


def _check_sudoku_model(model: MaskedModel) -> None:
    require(model.mask_id == MASK_ID and tuple(model.real_token_ids) == tuple(range(9))
            and model.max_length >= 81,
            "model: the sudoku task needs a model over Sudoku tokens (digits 0-8, MASK 9, "
            "length 81)")


def _load_sudoku_model(name_or_path: str | None, trust_remote_code: bool = False
                       ) -> MaskedModel:
    return load_model(name_or_path, task="sudoku", trust_remote_code=trust_remote_code)


def _sudoku_symmetries(count: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Random Sudoku symmetries (band/stack/line permutations, transpose, digit relabelling)
    as (cell_perm (count, 81), token_map (count, 10)); MASK maps to itself."""

    sym = sample_symmetry(count, np.random.default_rng([_SUDOKU_MASK_KEY, 0x5E, int(seed)]))
    return sym.cell_perm, sym.value_map(tokens=True)


LABEL_TASK = register_task(ContextTask(
    "sudoku", sudoku_contexts, _check_sudoku_model, _load_sudoku_model,
    "Sudoku solution grids, random cells masked", symmetries=_sudoku_symmetries))
