"""Shared Sudoku fixtures: well-known puzzles and a small batch of generated ones."""

from __future__ import annotations

import numpy as np
import pytest
from sudoku_examples import KNOWN

from unmask.sudoku import make_puzzles, parse_puzzle, random_full_grids


@pytest.fixture(scope="session")
def known() -> dict[str, np.ndarray]:
    return {name: parse_puzzle(text) for name, text in KNOWN.items()}


@pytest.fixture(scope="session")
def generated() -> tuple[np.ndarray, np.ndarray]:
    """(puzzles, solutions), 64 minimal unique-solution puzzles, each (64, 81) int8."""
    solutions = random_full_grids(64, seed=7)
    return make_puzzles(solutions, seed=8), solutions
