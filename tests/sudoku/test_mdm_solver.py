"""unmask.sudoku.mdm_solver: puzzles decoded by the MDM batch by batch, grids checked."""

import numpy as np
import pytest

from unmask.decode import DecodeConfig
from unmask.models.auto import load_model
from unmask.samplers import make_sampler
from unmask.sudoku.datasets import load_set
from unmask.sudoku.mdm_solver import solve_batches, solve_puzzles


@pytest.fixture(scope="module")
def model():
    return load_model("sudoku")


@pytest.fixture(scope="module")
def nearly_solved():
    """(puzzles with 1, 2 and 3 blanks, their solutions)."""
    _, solutions = load_set("medium")
    solutions = solutions[:3].astype(np.int8)
    puzzles = solutions.copy()
    for k in range(3):
        puzzles[k, [40, 0, 80][:k + 1]] = 0
    return puzzles, solutions


def test_one_token_per_pass_solves_each_puzzle_in_as_many_passes_as_blanks(model,
                                                                          nearly_solved):
    puzzles, solutions = nearly_solved
    grids, solved, nfe = solve_puzzles(model, puzzles, make_sampler("confidence"))
    assert grids.dtype == np.int8 and np.array_equal(grids, solutions)
    assert solved.tolist() == [True, True, True]
    assert nfe.tolist() == [1, 2, 3]


def test_batches_come_in_order_and_match_one_call(model, nearly_solved):
    puzzles, _ = nearly_solved
    whole = solve_puzzles(model, puzzles, make_sampler("confidence"))
    starts, parts = [], []
    for start, grids, solved, nfe in solve_batches(model, puzzles, make_sampler("confidence"),
                                                   DecodeConfig(),
                                                   batch_size=2):
        starts.append(start)
        parts.append((grids, solved, nfe))
    assert starts == [0, 2]
    for got, want in zip(zip(*parts, strict=True), whole, strict=True):
        assert np.array_equal(np.concatenate(got), want)


def test_no_puzzles_give_empty_arrays(model):
    grids, solved, nfe = solve_puzzles(model, np.zeros((0, 81), np.int8),
                                       make_sampler("confidence"))
    assert grids.shape == (0, 81) and solved.shape == (0,) and nfe.shape == (0,)
