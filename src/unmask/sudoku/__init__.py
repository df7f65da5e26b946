"""Sudoku: puzzle engine, parsing, symmetry augmentation, test sets and MDM tokens."""

from unmask.sudoku.engine import (
    Rating,
    count_solutions,
    is_valid_solution,
    make_puzzles,
    random_full_grids,
    rate,
    rounds_of_singles,
    singles_schedule,
    solve,
    solve_batch,
)
from unmask.sudoku.symmetry import Symmetry, augment, random_symmetry, sample_symmetry
from unmask.sudoku.tokens import MASK_ID, VOCAB_SIZE, grid_to_tokens, tokens_to_grid

__all__ = [
    "MASK_ID",
    "VOCAB_SIZE",
    "Rating",
    "Symmetry",
    "augment",
    "count_solutions",
    "grid_to_tokens",
    "is_valid_solution",
    "make_puzzles",
    "random_full_grids",
    "random_symmetry",
    "rate",
    "rounds_of_singles",
    "sample_symmetry",
    "singles_schedule",
    "solve",
    "solve_batch",
    "tokens_to_grid",
]
