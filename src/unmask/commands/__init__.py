"""CLI subcommands, one module per noun (``unmask sudoku ...`` in :mod:`unmask.commands.sudoku`,
``unmask mi ...`` in :mod:`unmask.commands.mi`, ...), registered by name in
:data:`unmask.commands.registry.COMMAND_MODULES` and imported when their command runs
(:func:`unmask.commands.registry.load_commands`)."""
