"""The flags of every command, in one place: the argument types and the flags commands share
(:mod:`~unmask.commands.flags.types`, :mod:`~unmask.commands.flags.paths`,
:mod:`~unmask.commands.flags.threads`, :mod:`~unmask.commands.flags.engine`,
:mod:`~unmask.commands.flags.sampler`, :mod:`~unmask.commands.flags.training`,
:mod:`~unmask.commands.flags.corrector`, :mod:`~unmask.commands.flags.bench`), and one module
per command module (``flags.sudoku`` for :mod:`unmask.commands.sudoku`) with one function per
verb, ``solve(parser)``, that adds that command's flags.

Nothing here imports torch or numpy at module level: ``unmask NOUN VERB --help`` builds its
parser from these modules alone. What turns flags into objects (a device, an engine, a
sampler entry) imports its library when it is called.
"""
