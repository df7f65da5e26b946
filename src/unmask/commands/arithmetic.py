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
from unmask.commands.bench_command import bench_arguments, bench_task, run_bench
from unmask.commands.registry import arguments, command
from unmask.commands.training_flags import add_training_args, training_setup
from unmask.models.transformer import MDMTransformer
from unmask.training import train
from unmask.validation import positive_int


def _train_args(p: argparse.ArgumentParser) -> None:
    add_training_args(p, out="runs/arithmetic", steps=30_000, batch_size=256, lr=2e-3,
                      warmup=500, eval_every=1000)
    p.add_argument("--a-digits", type=positive_int, default=2, help="width of the first factor")
    p.add_argument("--b-digits", type=positive_int, default=1,
                   help="width of the second factor")
    p.add_argument("--eval-prompts", type=positive_int, default=256,
                   help="prompts per direction")


@command("arithmetic", "train", help="train the multiplication MDM (checkpoints, --resume)")
@arguments(_train_args)
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


@command("arithmetic", "bench", help="benchmark every sampler on multiplication: accuracy, NFE, "
                                     "sequences, entropy")
@arguments(bench_arguments("arithmetic"))
def bench_arithmetic(args: argparse.Namespace) -> int:
    return run_bench(bench_task("arithmetic"), args)
