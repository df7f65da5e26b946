"""``unmask image train``, ``train-classifier`` and ``bench``: class-conditional 8x8 digits."""

from __future__ import annotations

import argparse
from pathlib import Path

from unmask.commands.flags.bench import bench_task, run_bench_command
from unmask.commands.flags.paths import TRAINING_RUN_FILES, claim_folder, command_name
from unmask.commands.flags.training import (
    check_resume_args,
    training_setup,
)
from unmask.commands.registry import command
from unmask.errors import UnmaskError
from unmask.image.classifier import train_classifier
from unmask.image.data import DEFAULT_LEVELS, image_model_config, load_digits_split
from unmask.image.model import DigitsMDM
from unmask.image.train import SELECT_METRIC, train_image_mdm


@command("image", "train")
def train_image(args: argparse.Namespace) -> int:

    overrides, cfg = training_setup(args, SELECT_METRIC)
    levels = args.levels or DEFAULT_LEVELS
    train_part, heldout = load_digits_split(levels)
    model = DigitsMDM(image_model_config(levels, **overrides))
    print(f"model: {sum(p.numel() for p in model.parameters()):,} parameters; "
          f"{len(train_part)} training / {len(heldout)} held-out images, {levels} grey levels",
          flush=True)
    out = Path(args.out)
    train_image_mdm(model, train_part, heldout, cfg, out, resume=args.resume,
                    overwrite=args.overwrite,
                    log=lambda s: print(s, flush=True))
    print(f"best weights: {out / 'best'}")
    return 0


@command("image", "train-classifier")
def train_digit_classifier(args: argparse.Namespace) -> int:


    if args.epochs < 1:
        raise UnmaskError(f"--epochs: must be >= 1, got {args.epochs}")
    claim_folder(args.out, "--out", command_name(args), overwrite=args.overwrite,
                 own_files=TRAINING_RUN_FILES)
    check_resume_args(args)
    levels = args.levels or DEFAULT_LEVELS
    train_part, heldout = load_digits_split(levels)
    model = train_classifier(train_part.images(), train_part.labels, args.out,
                             epochs=args.epochs, seed=args.seed, resume=args.resume,
                             override=args.override_config, overwrite=args.overwrite,
                             log=lambda s: print(s, flush=True))
    _, probs = model.embed(heldout.images())
    acc = float((probs.argmax(1) == heldout.labels).double().mean())
    model.save_pretrained(args.out, extra={"heldout_accuracy": acc, "levels": levels,
                                           "epochs": args.epochs, "seed": args.seed,
                                           "train_images": len(train_part),
                                           "heldout_images": len(heldout)})
    print(f"held-out accuracy {acc:.4f} ({len(heldout)} images); weights in {args.out}")
    return 0


@command("image", "bench")
def bench_image(args: argparse.Namespace) -> int:
    return run_bench_command(bench_task("image"), args)
