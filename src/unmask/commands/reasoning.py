"""``unmask reasoning train`` and ``unmask reasoning bench``: the text MDM on reasoning-gym
tasks."""

from __future__ import annotations

import argparse
from pathlib import Path

from unmask.commands.flags.bench import bench_task, run_bench_command
from unmask.commands.flags.training import training_setup
from unmask.commands.registry import command
from unmask.reasoning.tasks import get_tasks
from unmask.reasoning.train import ReasoningData, TextModelConfig, train_text_mdm


@command("reasoning", "train")
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


@command("reasoning", "bench")
def bench_reasoning(args: argparse.Namespace) -> int:
    return run_bench_command(bench_task("reasoning"), args)
