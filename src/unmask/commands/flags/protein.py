"""The flags of ``unmask protein train`` and ``unmask protein bench``
(:mod:`unmask.commands.protein`)."""

from __future__ import annotations

import argparse

from unmask.commands.flags.bench import bench_arguments
from unmask.commands.flags.training import add_training_args
from unmask.commands.flags.types import finite_float, positive_int, seed_int


def add_split_args(p: argparse.ArgumentParser) -> None:
    """The flags naming the train/held-out split (:func:`unmask.protein.data.model_split`),
    shared by ``unmask protein train`` and ``unmask protein bench``."""
    p.add_argument("--fasta", default=None,
                   help="protein FASTA file (default: the proteome shipped with pyhmmer)")
    p.add_argument("--heldout-fraction", type=finite_float(0.0, 1.0, open_low=True),
                   default=None,
                   help="share of proteins held out (default 0.1, or the model's split.json)")
    p.add_argument("--split-seed", type=seed_int, default=None,
                   help="seed of the train/held-out split (default 0, or the model's "
                        "split.json)")


def train(p: argparse.ArgumentParser) -> None:
    add_training_args(p, out="runs/protein", steps=2400, batch_size=64, lr=1.5e-3, warmup=200,
                      eval_every=200)
    add_split_args(p)
    p.add_argument("--eval-size", type=positive_int, default=512,
                   help="held-out crops per evaluation")


def bench_flags(p: argparse.ArgumentParser, d) -> None:
    """``unmask protein bench``'s own flags (:class:`unmask.protein.bench_task.ProteinBench`'s
    options, ``d`` their defaults)."""
    add_split_args(p)
    p.add_argument("--min-length", type=positive_int, default=d.min_length,
                   help="shortest generated protein")
    p.add_argument("--max-length", type=positive_int, default=d.max_length,
                   help="longest generated protein")
    p.add_argument("--batch-size", type=positive_int, default=d.batch_size)
    p.add_argument("--no-natural", action="store_true",
                   help="leave out the natural-crop reference rows")


bench = bench_arguments("protein", bench_flags)
