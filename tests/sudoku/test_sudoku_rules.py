"""The Sudoku rules as a decode constraint: allowed digits, joint commits, dead ends."""

import numpy as np
import torch

from unmask.constraints.base import Constrain
from unmask.decode import decode
from unmask.models import MDMTransformer, TransformerConfig
from unmask.sudoku.rules import SudokuRules
from unmask.sudoku.solver import is_valid_solution
from unmask.sudoku.tokens import MASK_ID, grid_to_tokens, tokens_to_grid

SOLUTION = np.array([int(c) for c in (
    "534678912672195348198342567859761423426853791713924856961537284287419635345286179")])


def _model():
    torch.manual_seed(0)
    cfg = TransformerConfig(vocab_size=10, mask_id=MASK_ID, max_length=81, d_model=16,
                            n_layers=1, n_heads=2, d_ff=32)
    return MDMTransformer(cfg).eval()


def test_allowed_digits_are_those_no_peer_holds():
    grid = SOLUTION.copy()
    grid[[0, 1, 9, 80]] = 0  # cells (0,0), (0,1), (1,0), (8,8) blank
    x = grid_to_tokens(grid[None])
    rules = SudokuRules()
    rules.prepare(_model(), x)
    allowed = rules.allowed(x, torch.arange(1), slice(0, 81))[0]
    digits = {i: set((allowed[i, :9].nonzero().squeeze(1) + 1).tolist()) for i in (0, 1, 9, 80)}
    # row 0 misses 5 and 3, column 0 misses 5 and 6, column 1 misses 3, row 1 misses 6
    assert digits == {0: {5}, 1: {3}, 9: {6}, 80: {9}}
    assert bool(allowed[2].all())  # a filled cell: unconstrained


def test_a_parallel_commit_never_repeats_a_digit_in_a_unit():
    grid = SOLUTION.copy()
    grid[:27] = 0  # the top three rows blank
    x = grid_to_tokens(np.repeat(grid[None], 8, 0))
    model = _model()
    out = decode(model, x, "topk:k=9", seed=3, constraint=SudokuRules())
    grids = tokens_to_grid(out.tokens)
    dead = out.stats["dead_end"].bool().numpy()
    for g, d in zip(grids, dead, strict=True):
        if not d:  # every unit of a finished board without a dead end holds 9 digits
            assert is_valid_solution(g[None], grid[None])[0]
    assert not bool((out.tokens == MASK_ID).any())
    assert out.stats["cut_passes"].sum() > 0  # k=9 at once must be cut sometimes


def test_a_dead_end_ends_the_row_without_nan():
    grid = np.zeros(81, dtype=np.int64)
    grid[1:9] = [1, 2, 3, 4, 5, 6, 7, 8]  # row 0 leaves only 9 for cell 0 ...
    grid[9 * 4] = 9                       # ... which its column already holds
    x = grid_to_tokens(np.stack([grid, SOLUTION * (np.arange(81) % 2)]))
    hook = Constrain(SudokuRules())
    out = decode(_model(), x, "confidence", hooks=[hook])
    assert out.stats["dead_end"].tolist() == [1, 0]
    assert not bool((out.tokens == MASK_ID).any())
    assert out.nfe[0] == 1  # the row ended at its first pass
    assert torch.isfinite(out.cumulative_entropy).all()
