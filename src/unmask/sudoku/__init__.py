"""Sudoku: puzzle solver, parsing, symmetry augmentation, test sets and MDM tokens."""

from unmask.lazy import lazy_exports

#: public name -> the submodule defining it (imported when the name is first read)
_EXPORTS = {
    "generate_test_set": "datasets",
    "load_set": "datasets",
    "training_grids": "datasets",
    "training_puzzle_masks": "datasets",
    "SudokuParseError": "parse",
    "check_clues": "parse",
    "format_grid": "parse",
    "parse_puzzle": "parse",
    "parse_puzzles": "parse",
    "read_puzzles": "parse",
    "to_string": "parse",
    "Rating": "solver",
    "count_solutions": "solver",
    "is_valid_solution": "solver",
    "make_puzzles": "solver",
    "random_full_grids": "solver",
    "rate": "solver",
    "rounds_of_singles": "solver",
    "singles_schedule": "solver",
    "solve": "solver",
    "solve_batch": "solver",
    "Symmetry": "symmetry",
    "augment": "symmetry",
    "random_symmetry": "symmetry",
    "sample_symmetry": "symmetry",
    "MASK_ID": "tokens",
    "VOCAB_SIZE": "tokens",
    "grid_to_tokens": "tokens",
    "tokens_to_grid": "tokens",
}
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
__all__ = ["MASK_ID", "Rating", "SudokuParseError", "Symmetry", "VOCAB_SIZE", "augment",
           "check_clues", "count_solutions", "format_grid", "generate_test_set", "grid_to_tokens",
           "is_valid_solution", "load_set", "make_puzzles", "parse_puzzle", "parse_puzzles",
           "random_full_grids", "random_symmetry", "rate", "read_puzzles", "rounds_of_singles",
           "sample_symmetry", "singles_schedule", "solve", "solve_batch", "to_string",
           "tokens_to_grid", "training_grids", "training_puzzle_masks"]
