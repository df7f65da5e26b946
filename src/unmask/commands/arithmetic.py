"""``unmask arithmetic train`` and ``unmask arithmetic bench``: the multiplication task."""

from __future__ import annotations

import argparse
from pathlib import Path

from unmask.arithmetic.format import EquationFormat
from unmask.arithmetic.train import (
    arithmetic_model_config,
    training_batch,
    training_metrics,
)
from unmask.commands.flags.bench import bench_task, run_bench_command
from unmask.commands.flags.training import training_setup
from unmask.commands.registry import command
from unmask.models.transformer import MDMTransformer
from unmask.training.mdm import train


@command("arithmetic", "train")
def train_arithmetic(args: argparse.Namespace) -> int:


    overrides, cfg = training_setup(args)
    fmt = EquationFormat(args.a_digits, args.b_digits)
    model = MDMTransformer(arithmetic_model_config(fmt, **overrides))
    out = Path(args.out)
    print(f"model: {sum(p.numel() for p in model.parameters()):,} parameters, "
          f"sequences of {fmt.length} tokens", flush=True)
    train(model, lambda step, bs: training_batch(fmt, step, bs, seed=args.seed), cfg, out,
          lambda m: training_metrics(m, fmt, args.eval_prompts), resume=args.resume,
              overwrite=args.overwrite,
          override=args.override_config, log=lambda s: print(s, flush=True),
          data={"eval_prompts": args.eval_prompts})
    print(f"best weights: {out / 'best'}")
    return 0


@command("arithmetic", "bench")
def bench_arithmetic(args: argparse.Namespace) -> int:
    return run_bench_command(bench_task("arithmetic"), args)
