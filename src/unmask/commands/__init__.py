"""CLI subcommands, one module per area, registered by name in
:data:`unmask.commands.registry.COMMAND_MODULES` and imported when their command runs
(:func:`unmask.commands.registry.load_commands`)."""
