"""The flags of ``unmask protein train`` and ``unmask protein bench``
(:mod:`unmask.commands.protein`)."""

from __future__ import annotations

import argparse

from unmask.commands.flags import types as arg_types
from unmask.commands.flags.bench import bench_arguments
from unmask.commands.flags.training import add_training_args
from unmask.protein.split_flags import add_split_args
from unmask.validation import positive_int


def train(p: argparse.ArgumentParser) -> None:
    add_training_args(p, out="runs/protein", steps=2400, batch_size=64, lr=1.5e-3, warmup=200,
                      eval_every=200)
    add_split_args(p, arg_types)
    p.add_argument("--eval-size", type=positive_int, default=512,
                   help="held-out crops per evaluation")


bench = bench_arguments("protein")
