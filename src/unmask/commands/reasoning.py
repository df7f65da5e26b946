"""``unmask reasoning train`` and ``unmask reasoning bench``: the text MDM on reasoning-gym
tasks."""

from __future__ import annotations

import argparse
from pathlib import Path

from unmask.commands.bench_command import bench_arguments, bench_task, run_bench
from unmask.commands.registry import arguments, command
from unmask.commands.training_flags import add_training_args, training_setup
from unmask.reasoning.tasks import TASKS, get_tasks
from unmask.reasoning.train import ReasoningData, TextModelConfig, train_text_mdm
from unmask.validation import positive_int


def _train_args(p: argparse.ArgumentParser) -> None:
    add_training_args(p, out="runs/reasoning", steps=40_000, batch_size=64, lr=1e-3,
                      warmup=500, eval_every=500, max_time=7200.0, decay_by_time=True,
                      architecture=False, device=False)
    p.add_argument("--pool", type=positive_int, default=ReasoningData.pool,
                   help=f"training problems per task (default {ReasoningData.pool})")
    p.add_argument("--tasks", nargs="+", default=None, choices=list(TASKS), metavar="TASK",
                   help="train on these tasks (default all)")


@command("reasoning", "train",
         help="train the character-level text MDM on the reasoning tasks (checkpoints, "
              "--resume)")
@arguments(_train_args)
def train_reasoning(args: argparse.Namespace) -> int:
    _, cfg = training_setup(args)
    tasks = tuple(t.name for t in get_tasks(args.tasks))
    weights = dict(zip(ReasoningData.tasks, ReasoningData.weights, strict=True))
    data = ReasoningData(tasks, tuple(weights[t] for t in tasks), args.pool)
    train_text_mdm(args.out, cfg, model_config=TextModelConfig(), data=data,
                   resume=args.resume, overwrite=args.overwrite,
                   override=args.override_config, log=lambda s: print(s, flush=True))
    print(f"best weights: {Path(args.out) / 'best'}")
    return 0


@command("reasoning", "bench", help="benchmark samplers on the reasoning tasks: accuracy by each "
                                    "task's verifier, NFE, tokens per pass, cumulative "
                                    "entropy, wall time, AUP")
@arguments(bench_arguments("reasoning"))
def bench_reasoning(args: argparse.Namespace) -> int:
    return run_bench(bench_task("reasoning"), args)
