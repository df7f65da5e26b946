"""The flags of ``unmask arithmetic train`` and ``unmask arithmetic bench``
(:mod:`unmask.commands.arithmetic`)."""

from __future__ import annotations

import argparse

from unmask.commands.flags.bench import bench_arguments
from unmask.commands.flags.training import add_training_args
from unmask.validation import positive_int


def train(p: argparse.ArgumentParser) -> None:
    add_training_args(p, out="runs/arithmetic", steps=30_000, batch_size=256, lr=2e-3,
                      warmup=500, eval_every=1000)
    p.add_argument("--a-digits", type=positive_int, default=2, help="width of the first factor")
    p.add_argument("--b-digits", type=positive_int, default=1,
                   help="width of the second factor")
    p.add_argument("--eval-prompts", type=positive_int, default=256,
                   help="prompts per direction")


bench = bench_arguments("arithmetic")
