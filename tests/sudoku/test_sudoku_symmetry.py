from __future__ import annotations

import numpy as np
import pytest
import torch

from unmask.sudoku import (
    Symmetry,
    augment,
    count_solutions,
    grid_to_tokens,
    is_valid_solution,
    random_symmetry,
    rounds_of_singles,
    sample_symmetry,
    tokens_to_grid,
)


def test_augmentation_keeps_puzzles_and_solutions_consistent(generated):
    puzzles, solutions = generated
    new_puzzles, new_solutions = augment(np.random.default_rng(0), puzzles, solutions)
    assert new_puzzles.dtype == np.int8 and new_puzzles.shape == puzzles.shape
    assert is_valid_solution(new_solutions, new_puzzles).all()
    assert ((new_puzzles > 0).sum(axis=1) == (puzzles > 0).sum(axis=1)).all()
    assert (count_solutions(new_puzzles, limit=2) == 1).all()
    # Singles deductions are invariant under the group, so the rounds are too.
    assert (rounds_of_singles(new_puzzles) == rounds_of_singles(puzzles)).all()
    # Each row gets its own element: rows are not all moved the same way.
    assert not (new_solutions == solutions).all(axis=1).any()


def test_rows_and_boxes_map_to_lines_and_boxes(generated):
    """New rows are old rows or (after transpose) old columns, and boxes map to boxes."""
    sym = sample_symmetry(200, np.random.default_rng(1))
    src = sym.cell_perm.reshape(200, 9, 9)
    old_rows, old_cols = src // 9, src % 9
    row_lines = (old_rows == old_rows[:, :, :1]).all(axis=2)
    col_lines = (old_cols == old_cols[:, :, :1]).all(axis=2)
    assert (row_lines.all(axis=1) | col_lines.all(axis=1)).all()
    assert (row_lines.all(axis=1) ^ col_lines.all(axis=1)).all()
    boxes = (old_rows // 3) * 3 + old_cols // 3
    new_boxes = boxes.reshape(200, 3, 3, 3, 3).transpose(0, 1, 3, 2, 4).reshape(200, 9, 9)
    assert (new_boxes == new_boxes[:, :, :1]).all()
    assert (np.sort(sym.digit_map[:, 1:], axis=1) == np.arange(1, 10)).all()
    assert (sym.digit_map[:, 0] == 0).all()


def test_group_action(generated):
    _, grids = generated
    rng = np.random.default_rng(2)
    n = len(grids)
    identity = Symmetry.identity(n)
    assert (identity.apply(grids) == grids).all()
    a, b = sample_symmetry(n, rng), sample_symmetry(n, rng)
    assert (a.inverse().apply(a.apply(grids)) == grids).all()
    assert (a.compose(a.inverse()).apply(grids) == grids).all()
    composed = a.compose(b)
    assert (composed.apply(grids) == b.apply(a.apply(grids))).all()
    assert is_valid_solution(composed.apply(grids)).all()
    c = sample_symmetry(n, rng)
    left = a.compose(b).compose(c)
    right = a.compose(b.compose(c))
    assert (left.cell_perm == right.cell_perm).all() and (left.digit_map == right.digit_map).all()


def test_same_seed_same_augmentation(generated):
    puzzles, _ = generated
    one = random_symmetry(puzzles, np.random.default_rng(5))
    two = random_symmetry(puzzles, 5)
    assert (one == two).all()
    g1, g2 = torch.Generator().manual_seed(3), torch.Generator().manual_seed(3)
    assert (augment(g1, puzzles) == augment(g2, puzzles)).all()


def test_torch_and_token_inputs(generated):
    puzzles, solutions = generated
    sym = sample_symmetry(len(puzzles), np.random.default_rng(4))
    expected = sym.apply(puzzles)
    as_torch = sym.apply(torch.from_numpy(puzzles))
    assert isinstance(as_torch, torch.Tensor) and as_torch.dtype == torch.int8
    assert (as_torch.numpy() == expected).all()
    tokens = grid_to_tokens(puzzles)
    moved = sym.apply(tokens, tokens=True)
    assert moved.dtype == torch.long
    assert (tokens_to_grid(moved) == expected).all()
    single = sample_symmetry(1, np.random.default_rng(4))
    assert single.apply(solutions[0]).shape == (81,)


def test_shape_and_rng_errors(generated):
    puzzles, _ = generated
    with pytest.raises(ValueError, match="shape"):
        sample_symmetry(3, 0).apply(puzzles)
    with pytest.raises(TypeError, match="rng"):
        augment("seed", puzzles)
    with pytest.raises(ValueError, match="at least one"):
        augment(0)
