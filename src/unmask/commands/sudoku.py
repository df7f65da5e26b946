"""``unmask sudoku ...``."""
