"""``unmask train arithmetic`` and ``unmask bench arithmetic``: the multiplication task."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from unmask.cli import arguments, command


def _train_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", default="runs/arithmetic", help="run folder (checkpoints, best/)")
    p.add_argument("--resume", action="store_true", help="continue from OUT/checkpoint.pt")
    p.add_argument("--a-digits", type=int, default=2, help="width of the first factor")
    p.add_argument("--b-digits", type=int, default=2, help="width of the second factor")
    p.add_argument("--steps", type=int, default=30_000, help="total optimiser steps")
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--warmup", type=int, default=500)
    p.add_argument("--eval-every", type=int, default=1000)
    p.add_argument("--eval-prompts", type=int, default=256, help="prompts per direction")
    p.add_argument("--max-time", type=float, default=None, help="stop after this many seconds")
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--device", default="cpu")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--model-config", default=None,
                   help="JSON object overriding the architecture (e.g. '{\"n_layers\": 3}')")
    p.add_argument("--no-bf16", action="store_true")


@command("train", "arithmetic", help="train the multiplication MDM (checkpoints, --resume)")
@arguments(_train_args)
def train_arithmetic(args: argparse.Namespace) -> int:
    import torch

    from unmask.arithmetic.format import EquationFormat
    from unmask.arithmetic.train import arithmetic_model_config, training_batch, training_metrics
    from unmask.errors import UnmaskError
    from unmask.models.transformer import MDMTransformer
    from unmask.training import TrainConfig, train

    if args.threads:
        torch.set_num_threads(args.threads)
    try:
        overrides = json.loads(args.model_config) if args.model_config else {}
    except json.JSONDecodeError as e:
        raise UnmaskError(f"--model-config: not a JSON object ({e.msg})") from None
    fmt = EquationFormat(args.a_digits, args.b_digits)
    model = MDMTransformer(arithmetic_model_config(fmt, **overrides))
    cfg = TrainConfig(batch_size=args.batch_size, lr=args.lr, warmup_steps=args.warmup,
                      total_steps=args.steps, eval_every=args.eval_every,
                      max_time_s=args.max_time, seed=args.seed, device=args.device,
                      bf16=not args.no_bf16)
    out = Path(args.out)
    print(f"model: {sum(p.numel() for p in model.parameters()):,} parameters, "
          f"sequences of {fmt.length} tokens", flush=True)
    train(model, lambda step, bs: training_batch(fmt, step, bs, seed=args.seed), cfg, out,
          lambda m: training_metrics(m, fmt, args.eval_prompts), resume=args.resume,
          log=lambda s: print(s, flush=True))
    print(f"best weights: {out / 'best'}")
    return 0
