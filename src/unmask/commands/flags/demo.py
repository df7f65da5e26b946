"""The flags of ``unmask demo`` (:mod:`unmask.commands.demo`)."""

from __future__ import annotations

import argparse

from unmask.commands.flags.threads import add_threads_arg
from unmask.commands.flags.types import positive_int


def demo(p: argparse.ArgumentParser) -> None:
    p.add_argument("--puzzles", type=positive_int, default=100,
                   help="hard puzzles to solve (default %(default)s)")
    add_threads_arg(p)
