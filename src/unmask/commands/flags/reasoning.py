"""The flags of ``unmask reasoning train`` and ``unmask reasoning bench``
(:mod:`unmask.commands.reasoning`)."""

from __future__ import annotations

import argparse

from unmask.commands.flags.bench import bench_arguments
from unmask.commands.flags.training import add_training_args
from unmask.commands.flags.types import default_of
from unmask.reasoning.tasks import TASKS
from unmask.validation import positive_int


def train(p: argparse.ArgumentParser) -> None:
    add_training_args(p, out="runs/reasoning", steps=40_000, batch_size=64, lr=1e-3,
                      warmup=500, eval_every=500, max_time=7200.0, decay_by_time=True,
                      architecture=False, device=False)
    p.add_argument("--pool", type=positive_int,
                   default=default_of("unmask.reasoning.train:ReasoningData", "pool"),
                   help="training problems per task (default %(default)s)")
    p.add_argument("--tasks", nargs="+", default=None, choices=list(TASKS), metavar="TASK",
                   help="train on these tasks (default all)")


bench = bench_arguments("reasoning")
