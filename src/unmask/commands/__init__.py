"""CLI subcommands, one module per area; importing this package registers them."""

from unmask.commands import demo, sudoku, train  # noqa: F401
