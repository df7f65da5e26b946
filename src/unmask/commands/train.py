"""``unmask train sudoku``: train the Sudoku MDM with checkpoints and --resume."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from unmask.cli import arguments, command


def _train_sudoku_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", default="runs/sudoku", help="run folder (checkpoints, best/)")
    p.add_argument("--resume", action="store_true", help="continue from OUT/checkpoint.pt")
    p.add_argument("--init-from", default=None, metavar="MODEL",
                   help="start from these weights (e.g. 'sudoku', the shipped model) with a "
                        "fresh optimiser: how a later run continues the shipped model")
    p.add_argument("--steps", type=int, default=40_000, help="total optimiser steps")
    p.add_argument("--batch-size", type=int, default=128)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--warmup", type=int, default=500)
    p.add_argument("--pool", type=int, default=100_000, help="generated training puzzles")
    p.add_argument("--puzzle-fraction", type=float, default=0.5,
                   help="share of samples masked like a puzzle (the rest uniformly)")
    p.add_argument("--eval-every", type=int, default=1000)
    p.add_argument("--eval-puzzles", type=int, default=100, help="hard puzzles per evaluation")
    p.add_argument("--max-time", type=float, default=None, help="stop after this many seconds")
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--device", default="cpu")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--model-config", default=None,
                   help="JSON object overriding the architecture (e.g. '{\"n_layers\": 6}')")
    p.add_argument("--no-bf16", action="store_true")


@command("train", "sudoku", help="train the Sudoku MDM (checkpoints every few minutes)")
@arguments(_train_sudoku_args)
def train_sudoku(args: argparse.Namespace) -> int:
    import torch

    from unmask.errors import UnmaskError
    from unmask.models.transformer import MDMTransformer
    from unmask.sudoku.datasets import load_set
    from unmask.sudoku.train import SudokuPool, solve_rate, sudoku_model_config
    from unmask.training import TrainConfig, train

    if args.threads:
        torch.set_num_threads(args.threads)
    try:
        overrides = json.loads(args.model_config) if args.model_config else {}
    except json.JSONDecodeError as e:
        raise UnmaskError(f"--model-config: not a JSON object ({e.msg})") from None
    if args.init_from and args.resume:
        raise UnmaskError("--init-from: cannot be combined with --resume")
    if args.init_from:
        from unmask.pretrained import load_model

        model = load_model(args.init_from)
        if overrides:
            raise UnmaskError("--model-config: the architecture comes from --init-from")
    else:
        model = MDMTransformer(sudoku_model_config(**overrides))
    cfg = TrainConfig(batch_size=args.batch_size, lr=args.lr, warmup_steps=args.warmup,
                      total_steps=args.steps, eval_every=args.eval_every,
                      max_time_s=args.max_time, seed=args.seed, device=args.device,
                      bf16=not args.no_bf16)
    hard, hard_solutions = load_set("hard")
    medium, medium_solutions = load_set("medium")
    import numpy as np

    out = Path(args.out)
    print(f"generating {args.pool:,} training puzzles (cached under {out})", flush=True)
    pool = SudokuPool.generate(args.pool, seed=1000 + args.seed,
                               exclude=np.concatenate([hard_solutions, medium_solutions]),
                               cache_dir=out / "cache")
    eval_set = hard[: args.eval_puzzles]

    def evaluate(m):
        m.autocast_bf16 = False
        res = solve_rate(m, eval_set)
        return {"accuracy": res["accuracy"], "eval_nfe": res["nfe"]}

    print(f"model: {sum(p.numel() for p in model.parameters()):,} parameters", flush=True)
    def report(step, stats):
        if step % 100 == 0:
            print(f"step {step} loss {stats['loss']:.4f}", flush=True)

    train(model, lambda step, bs: pool.batch(step, bs, seed=args.seed,
                                             puzzle_fraction=args.puzzle_fraction),
          cfg, out, evaluate, resume=args.resume, log=lambda s: print(s, flush=True),
          progress=report)
    print(f"best weights: {out / 'best'}")
    return 0
