"""``unmask protein train`` and ``unmask protein bench``: protein generation at a given length."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from unmask.commands.flags.bench import bench_task, run_bench_command
from unmask.commands.flags.training import training_setup
from unmask.commands.registry import command
from unmask.errors import UnmaskError
from unmask.io import atomic_write_text
from unmask.protein.data import model_split, split_record, training_batch
from unmask.protein.model import ProteinMDM, protein_model_config
from unmask.protein.train import heldout_eval_set, masked_loss
from unmask.training.mdm import train


def split_from_args(args: argparse.Namespace, model_dir: str | Path | None = None):
    """The train/held-out split the flags (or the model's split.json) name."""
    return model_split(args.fasta, args.heldout_fraction, args.split_seed, model_dir)


@command("protein", "train")
def train_protein(args: argparse.Namespace) -> int:


    overrides, cfg = training_setup(args, "score")
    if args.eval_size < 1:
        raise UnmaskError(f"--eval-size: must be >= 1, got {args.eval_size}")
    split = split_from_args(args)
    fraction = 0.1 if args.heldout_fraction is None else args.heldout_fraction
    seed = 0 if args.split_seed is None else args.split_seed
    out = Path(args.out)
    record = split_record(split, fraction, seed)
    skips = ", ".join(f"{v} {k}" for k, v in split.skipped.items() if v) or "none"
    print(f"data: {split.source}: {len(split.train)} training and {len(split.heldout)} held-out "
          f"proteins; skipped: {skips}", flush=True)
    model = ProteinMDM(protein_model_config(**overrides))
    print(f"model: {sum(p.numel() for p in model.parameters()):,} parameters", flush=True)
    train_crops = split.train_sampler()
    eval_set = heldout_eval_set(split.heldout_sampler(), args.eval_size)

    def write_split(best: Path) -> None:  # the split goes with the weights it trained
        for folder in (out, best):
            atomic_write_text(folder / "split.json", json.dumps(record, indent=2) + "\n")

    def evaluate(m):
        metrics = masked_loss(m, *(t.to(args.device) for t in eval_set))
        # the selection metric is "higher is better": the negated held-out loss
        return {**metrics, "score": -metrics["heldout_loss"]}

    data = {"fasta": str(args.fasta) if args.fasta else None, "heldout_fraction": fraction,
            "split_seed": seed, "eval_size": args.eval_size}
    train(model, lambda step, bs: training_batch(train_crops, step, bs, seed=args.seed), cfg,
          out, evaluate, resume=args.resume, overwrite=args.overwrite,
              override=args.override_config,
          log=lambda s: print(s, flush=True), data=data, on_best=write_split)
    print(f"best weights: {out / 'best'}")
    return 0


@command("protein", "bench")
def bench_protein(args: argparse.Namespace) -> int:
    return run_bench_command(bench_task("protein"), args)
