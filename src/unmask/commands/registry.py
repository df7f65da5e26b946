"""The registry of ``unmask`` subcommands: each command module registers its ``run(args)``
under a name path with :func:`command`, its arguments with :func:`arguments`."""

from __future__ import annotations

import argparse
from collections.abc import Callable

#: name path (e.g. ("sudoku", "train")) -> (help, add_arguments, run)
COMMANDS: dict[tuple[str, ...], tuple[str, Callable, Callable]] = {}

#: help of each noun (the first word of ``unmask NOUN VERB``)
GROUPS = {
    "sudoku": "Sudoku: solve puzzles, train the MDM, benchmark samplers",
    "mi": "pairwise mutual information: label by probing, train/evaluate the estimator, maps",
    "corrector": "the corrector that finds wrong decoded tokens",
    "protein": "protein generation: train the MDM, benchmark samplers",
    "arithmetic": "the multiplication task: train the MDM, benchmark samplers",
    "reasoning": "text reasoning tasks: train the text MDM, benchmark samplers",
    "results": "bench result files: plot, pool",
}


def command(*path: str, help: str):
    """Register ``run(args)`` as a subcommand; ``add_arguments(parser)`` is set via .args."""

    def wrap(run: Callable) -> Callable:
        COMMANDS[path] = (help, getattr(run, "_add_args", lambda p: None), run)
        return run

    return wrap


def arguments(add: Callable[[argparse.ArgumentParser], None]):
    def wrap(run: Callable) -> Callable:
        run._add_args = add
        return run

    return wrap
