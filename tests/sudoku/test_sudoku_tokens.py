from __future__ import annotations

import numpy as np
import pytest
import torch

from unmask.sudoku import MASK_ID, VOCAB_SIZE, grid_to_tokens, tokens_to_grid


def test_convention():
    assert (MASK_ID, VOCAB_SIZE) == (9, 10)
    grid = np.zeros(81, dtype=np.int8)
    grid[:9] = np.arange(1, 10)
    tokens = grid_to_tokens(grid)
    assert tokens.dtype == torch.long and tokens.shape == (81,)
    assert tokens[:9].tolist() == list(range(9))
    assert (tokens[9:] == MASK_ID).all()


def test_round_trip_numpy_and_torch():
    rng = np.random.default_rng(0)
    grids = rng.integers(0, 10, size=(5, 81)).astype(np.int8)
    tokens = grid_to_tokens(grids)
    assert tokens.shape == (5, 81)
    back = tokens_to_grid(tokens)
    assert back.dtype == np.int8 and (back == grids).all()
    assert (grid_to_tokens(torch.from_numpy(grids)) == tokens).all()
    assert (tokens_to_grid(tokens.numpy()) == grids).all()


def test_rejects_out_of_range_values():
    with pytest.raises(ValueError, match="0 \\(blank\\) or digits"):
        grid_to_tokens(np.full(81, 10))
    with pytest.raises(ValueError, match="token ids"):
        tokens_to_grid(np.full(81, 10))
    with pytest.raises(ValueError, match="81 cells"):
        grid_to_tokens(np.zeros(80))
