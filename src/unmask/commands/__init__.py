"""CLI subcommands, one module per noun (``unmask sudoku ...`` in :mod:`unmask.commands.sudoku`,
``unmask mi ...`` in :mod:`unmask.commands.mi`, ...), registered by name in
:data:`unmask.commands.registry.COMMAND_MODULES`; their flags are in
:mod:`unmask.commands.flags` (imported to parse), the command module is imported to run."""
