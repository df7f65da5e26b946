"""The flags of ``unmask sudoku solve``, ``bench`` and ``train`` (:mod:`unmask.commands.sudoku`)."""

from __future__ import annotations

import argparse

from unmask.commands.flags.bench import bench_arguments
from unmask.commands.flags.corrector import add_corrector_args
from unmask.commands.flags.sampler import add_sampler_arg
from unmask.commands.flags.threads import add_threads_arg
from unmask.commands.flags.training import add_training_args
from unmask.commands.flags.types import add_seed_arg, default_of, finite_float, positive_int


def solve(p: argparse.ArgumentParser) -> None:
    p.add_argument("puzzles", nargs="*", metavar="PUZZLE",
                   help="81 characters, digits with 0 or . for blanks")
    p.add_argument("--file", metavar="PATH",
                   help="a UTF-8 file of puzzles, one per line (or 9-line grids); - reads "
                        "standard input")
    add_sampler_arg(p)
    p.add_argument("--model", default=None,
                   help="shipped model name or model folder (default: the shipped one)")
    p.add_argument("--temperature", type=finite_float(0.0),
                   default=default_of("unmask.decode:DecodeConfig", "temperature"),
                   help="token temperature (default %(default)s: the argmax)")
    add_seed_arg(p)
    p.add_argument("--batch-size", type=positive_int, default=500,
                   help="puzzles per decode call; results are printed batch by batch "
                        "(default %(default)s)")
    add_corrector_args(p)
    add_threads_arg(p)
    p.add_argument("--json", action="store_true",
                   help="one JSON object per puzzle per line, written as each batch finishes")


def bench_flags(p: argparse.ArgumentParser, d) -> None:
    """``unmask sudoku bench``'s own flags (:class:`unmask.sudoku.bench_task.SudokuBench`'s
    options, ``d`` their defaults)."""
    p.add_argument("--set", default=d.set,
                   help="hard | medium | a UTF-8 puzzle file (default %(default)s)")
    p.add_argument("--batch-size", type=positive_int, default=d.batch_size,
                   help="puzzles per decode call (default %(default)s)")
    p.add_argument("--no-self-condition", action="store_true",
                   help="(self-conditioning models) give every pass zeros instead of the "
                        "previous pass's beliefs, to measure what they add")
    p.add_argument("--rules", action="store_true",
                   help="decode under the Sudoku rules: no digit twice in a row, column or "
                        "box, also within one pass; a board left with a blank no digit fits "
                        "ends (the 'dead end %%' column)")


bench = bench_arguments("sudoku", bench_flags)


def train(p: argparse.ArgumentParser) -> None:
    add_training_args(p, out="runs/sudoku", steps=40_000, batch_size=128, lr=1e-3, warmup=500,
                      eval_every=1000)
    p.add_argument("--init-from", default=None, metavar="MODEL",
                   help="start from these weights (e.g. 'sudoku', the shipped model) with a "
                        "fresh optimiser: how a later run continues the shipped model")
    p.add_argument("--deepen", type=positive_int, default=1, metavar="K",
                   help="with --init-from: K times the layers, each new layer a copy of the "
                        "one before it that starts as the identity (the same function to "
                        "begin with); resume such a run with --model-config "
                        "'{\"n_layers\": L}'")
    p.add_argument("--self-condition", action="store_true",
                   help="the model also reads the previous pass's predictions (with "
                        "--init-from: added as a map that starts at zero, the same function "
                        "to begin with); resume such a run with --resume --self-condition")
    p.add_argument("--pool", type=positive_int, default=100_000,
                   help="generated training puzzles")
    p.add_argument("--puzzle-fraction", type=finite_float(0.0, 1.0), default=0.5,
                   help="share of samples masked like a puzzle (the rest uniformly)")
    p.add_argument("--eval-puzzles", type=positive_int, default=100,
                   help="hard puzzles per evaluation")
    p.add_argument("--decoder-states", default=None, metavar="STATES.pt",
                   help="also learn from the states a decoder visited (the states.pt that "
                        "`unmask corrector train` keeps), wrong tokens back at MASK: a "
                        "fine-tune on the decoder's own state distribution")
    p.add_argument("--states-fraction", type=finite_float(), default=0.5,
                   help="with --decoder-states: share of each batch drawn from them")
