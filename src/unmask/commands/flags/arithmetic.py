"""The flags of ``unmask arithmetic train`` and ``unmask arithmetic bench``
(:mod:`unmask.commands.arithmetic`)."""

from __future__ import annotations

import argparse

from unmask.commands.flags.bench import bench_arguments
from unmask.commands.flags.training import add_training_args
from unmask.commands.flags.types import positive_int


def train(p: argparse.ArgumentParser) -> None:
    add_training_args(p, out="runs/arithmetic", steps=30_000, batch_size=256, lr=2e-3,
                      warmup=500, eval_every=1000)
    p.add_argument("--a-digits", type=positive_int, default=2, help="width of the first factor")
    p.add_argument("--b-digits", type=positive_int, default=1,
                   help="width of the second factor")
    p.add_argument("--eval-prompts", type=positive_int, default=256,
                   help="prompts per direction")


def bench_flags(p: argparse.ArgumentParser, d) -> None:
    """``unmask arithmetic bench``'s own flags
    (:class:`unmask.arithmetic.bench_task.ArithmeticBench`'s options, ``d`` their
    defaults)."""
    p.add_argument("--tasks", default=",".join(d.tasks),
                   help="comma-separated: generate, product (factors given), factors "
                        "(product given)")


bench = bench_arguments("arithmetic", bench_flags)
