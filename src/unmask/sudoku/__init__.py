"""Sudoku: puzzle solver, parsing, symmetry augmentation, test sets and MDM tokens."""

from unmask.sudoku.datasets import (
    generate_test_set,
    load_set,
    training_grids,
    training_puzzle_masks,
)
from unmask.sudoku.parse import (
    SudokuParseError,
    check_clues,
    format_grid,
    parse_puzzle,
    parse_puzzles,
    read_puzzles,
    to_string,
)
from unmask.sudoku.solver import (
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
    "SudokuParseError",
    "Symmetry",
    "augment",
    "check_clues",
    "count_solutions",
    "format_grid",
    "generate_test_set",
    "grid_to_tokens",
    "is_valid_solution",
    "load_set",
    "make_puzzles",
    "parse_puzzle",
    "parse_puzzles",
    "random_full_grids",
    "random_symmetry",
    "rate",
    "read_puzzles",
    "rounds_of_singles",
    "sample_symmetry",
    "singles_schedule",
    "solve",
    "solve_batch",
    "to_string",
    "tokens_to_grid",
    "training_grids",
    "training_puzzle_masks",
]
