"""``unmask image train``, ``train-classifier`` and ``bench``: class-conditional 8x8 digits."""

from __future__ import annotations

import argparse
from pathlib import Path

from unmask.commands.arg_types import add_seed_arg
from unmask.commands.bench_command import bench_arguments, bench_task, run_bench
from unmask.commands.paths import TRAINING_RUN_FILES, claim_folder, command_name
from unmask.commands.registry import arguments, command
from unmask.commands.threads import add_threads_arg
from unmask.commands.training_flags import (
    add_resume_args,
    add_training_args,
    check_resume_args,
    training_setup,
)
from unmask.errors import UnmaskError
from unmask.image.classifier import train_classifier
from unmask.image.data import DEFAULT_LEVELS, image_model_config, load_digits_split
from unmask.image.model import DigitsMDM
from unmask.image.train import SELECT_METRIC, train_image_mdm


def _train_args(p: argparse.ArgumentParser) -> None:
    add_training_args(p, out="runs/image", steps=20_000, batch_size=128, lr=2e-3,
                      warmup=300, eval_every=500)
    p.add_argument("--levels", type=int, default=None,
                   help="grey levels of the pixel tokens (default: the data module's)")


@command("image", "train", help="train the class-conditional digits MDM (checkpoints, --resume)")
@arguments(_train_args)
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



def _classifier_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", default="runs/digit_classifier",
                   help="folder for the weights (and the run's checkpoint and history)")
    add_resume_args(p)
    p.add_argument("--epochs", type=int, default=60)
    p.add_argument("--levels", type=int, default=None,
                   help="grey levels of the held-out check (default: the data module's)")
    add_seed_arg(p)
    add_threads_arg(p)


@command("image", "train-classifier",
         help="train the digit classifier whose features the image metrics use")
@arguments(_classifier_args)
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


@command("image", "bench", help="benchmark every sampler on class-conditional digits: FID, IS, "
                                "class accuracy, NFE, wall time")
@arguments(bench_arguments("image"))
def bench_image(args: argparse.Namespace) -> int:
    return run_bench(bench_task("image"), args)
