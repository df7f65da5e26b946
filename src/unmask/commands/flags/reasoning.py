"""The flags of ``unmask reasoning train`` and ``unmask reasoning bench``
(:mod:`unmask.commands.reasoning`)."""

from __future__ import annotations

import argparse

from unmask.commands.flags.bench import bench_arguments
from unmask.commands.flags.training import add_training_args
from unmask.commands.flags.types import add_confidence_arg, default_of, positive_int
from unmask.reasoning.tasks import TASKS


def train(p: argparse.ArgumentParser) -> None:
    add_training_args(p, out="runs/reasoning", steps=40_000, batch_size=64, lr=1e-3,
                      warmup=500, eval_every=500, max_time=7200.0, decay_by_time=True,
                      architecture=False, device=False)
    p.add_argument("--pool", type=positive_int,
                   default=default_of("unmask.reasoning.train:ReasoningData", "pool"),
                   help="training problems per task (default %(default)s)")
    p.add_argument("--tasks", nargs="+", default=None, choices=list(TASKS), metavar="TASK",
                   help="train on these tasks (default all)")


def bench_flags(p: argparse.ArgumentParser, d) -> None:
    """``unmask reasoning bench``'s own flags
    (:class:`unmask.reasoning.bench_task.ReasoningBench`'s options, ``d`` their defaults)."""
    p.add_argument("--tasks", nargs="+", default=d.tasks, metavar="TASK",
                   help=f"tasks to run (default all: {', '.join(TASKS)})")
    add_confidence_arg(p)


bench = bench_arguments("reasoning", bench_flags)
