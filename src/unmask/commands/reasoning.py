"""``unmask reasoning train`` and ``unmask reasoning bench``: the text MDM on reasoning-gym
tasks."""

from __future__ import annotations

import argparse
from pathlib import Path

from unmask.commands.common import (
    add_resume_args,
    add_seed_arg,
    add_threads_arg,
    check_resume_args,
    finite_float,
    output_folder,
    positive_int,
)
from unmask.commands.registry import arguments, command
from unmask.reasoning.tasks import TASKS, get_tasks
from unmask.reasoning.train import ReasoningData, TextModelConfig, train_text_mdm
from unmask.training import LoopConfig


def _train_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", default="runs/reasoning",
                   help="run folder (checkpoints, best/; default runs/reasoning)")
    add_resume_args(p)
    p.add_argument("--steps", type=positive_int, default=40_000)
    p.add_argument("--batch-size", type=positive_int, default=64)
    p.add_argument("--lr", type=finite_float(0.0, open_low=True), default=1e-3)
    p.add_argument("--eval-every", type=positive_int, default=500)
    p.add_argument("--max-time", type=finite_float(0.0, open_low=True), default=7200.0,
                   help="seconds of training over all resumes; the learning rate decays over "
                        "whichever budget, steps or time, runs out first (default 7200)")
    p.add_argument("--pool", type=positive_int, default=ReasoningData.pool,
                   help=f"training problems per task (default {ReasoningData.pool})")
    p.add_argument("--tasks", nargs="+", default=None, choices=list(TASKS), metavar="TASK",
                   help="train on these tasks (default all)")
    add_seed_arg(p)
    add_threads_arg(p)
    p.add_argument("--no-bf16", action="store_true")


@command("reasoning", "train",
         help="train the character-level text MDM on the reasoning tasks (checkpoints, "
              "--resume)")
@arguments(_train_args)
def train_reasoning(args: argparse.Namespace) -> int:
    output_folder(args.out, "--out")
    check_resume_args(args)
    tasks = tuple(t.name for t in get_tasks(args.tasks))
    weights = dict(zip(ReasoningData.tasks, ReasoningData.weights, strict=True))
    data = ReasoningData(tasks, tuple(weights[t] for t in tasks), args.pool)
    loop = LoopConfig(total_steps=args.steps, lr=args.lr, min_lr=5e-5, warmup_steps=500,
                      eval_every=args.eval_every, metric="accuracy", higher_is_better=True,
                      max_time_s=args.max_time, decay_by_time=True, checkpoint_every_s=300,
                      grad_clip=1.0, batch_size=args.batch_size)
    train_text_mdm(args.out, loop, batch_size=args.batch_size, model_config=TextModelConfig(),
                   data=data, seed=args.seed, bf16=not args.no_bf16, resume=args.resume,
                       overwrite=args.overwrite,
                   override=args.override_config, log=lambda s: print(s, flush=True))
    print(f"best weights: {Path(args.out) / 'best'}")
    return 0
