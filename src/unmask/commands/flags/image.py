"""The flags of ``unmask image train``, ``train-classifier`` and ``bench``
(:mod:`unmask.commands.image`)."""

from __future__ import annotations

import argparse

from unmask.commands.flags.bench import bench_arguments
from unmask.commands.flags.threads import add_threads_arg
from unmask.commands.flags.training import (
    add_resume_args,
    add_training_args,
)
from unmask.commands.flags.types import add_confidence_arg, add_seed_arg, int_at_least


def train(p: argparse.ArgumentParser) -> None:
    add_training_args(p, out="runs/image", steps=20_000, batch_size=128, lr=2e-3,
                      warmup=300, eval_every=500)
    p.add_argument("--levels", type=int, default=None,
                   help="grey levels of the pixel tokens (default: the data module's)")


def train_classifier(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", default="runs/digit_classifier",
                   help="folder for the weights (and the run's checkpoint and history)")
    add_resume_args(p)
    p.add_argument("--epochs", type=int, default=60)
    p.add_argument("--levels", type=int, default=None,
                   help="grey levels of the held-out check (default: the data module's)")
    add_seed_arg(p)
    add_threads_arg(p)


def bench_flags(p: argparse.ArgumentParser, d) -> None:
    """``unmask image bench``'s own flags (:class:`unmask.image.bench_task.ImageBench`'s
    options, ``d`` their defaults)."""
    p.add_argument("--classifier", default=d.classifier,
                   help="shipped classifier name or a classifier folder (the metrics' "
                        "features)")
    add_confidence_arg(p)
    p.add_argument("--rounds", type=int_at_least(2), default=d.rounds,
                   help="bootstrap resamples")
    p.add_argument("--grid", default=None, metavar="F.png",
                   help="write a PNG with one row of samples per sampler")


bench = bench_arguments("image", bench_flags)
