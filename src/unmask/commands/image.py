"""``unmask image train`` and ``unmask image bench``: class-conditional 8x8 digits."""

from __future__ import annotations

import argparse
from pathlib import Path

from unmask.bench import wide_console
from unmask.commands.common import (
    add_cache_arg,
    add_confidence_arg,
    add_engine_args,
    add_presets_arg,
    add_seed_arg,
    add_threads_arg,
    add_training_args,
    bench_entries,
    engine_from_args,
    output_path,
    progress_bar,
    temperatures_arg,
    training_setup,
)
from unmask.commands.registry import arguments, command
from unmask.errors import UnmaskError
from unmask.image.bench import (
    DEFAULT_SPECS,
    frequencies_of,
    run_image_bench,
    with_frequencies,
    write_grid,
)
from unmask.image.classifier import DigitClassifier, train_classifier
from unmask.image.data import DEFAULT_LEVELS, image_model_config, levels_of, load_digits_split
from unmask.image.model import DigitsMDM, load_digits_model
from unmask.image.train import SELECT_METRIC, train_image_mdm
from unmask.io import atomic_write_text
from unmask.pretrained import describe_source, model_folder
from unmask.sweep import ModelRecipe


def _train_args(p: argparse.ArgumentParser) -> None:
    add_training_args(p, out="runs/image", steps=20_000, batch_size=128, lr=2e-3,
                      warmup=300, eval_every=500)
    p.add_argument("--levels", type=int, default=None,
                   help="grey levels of the pixel tokens (default: the data module's)")


@command("image", "train", help="train the class-conditional digits MDM (checkpoints, --resume)")
@arguments(_train_args)
def train_image(args: argparse.Namespace) -> int:

    overrides, cfg = training_setup(args, select_metric=SELECT_METRIC)
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
    p.add_argument("--out", default="runs/digit_classifier", help="folder for the weights")
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
    levels = args.levels or DEFAULT_LEVELS
    train_part, heldout = load_digits_split(levels)
    model = train_classifier(train_part.images(), train_part.labels, epochs=args.epochs,
                             seed=args.seed)
    _, probs = model.embed(heldout.images())
    acc = float((probs.argmax(1) == heldout.labels).double().mean())
    model.save_pretrained(args.out, extra={"heldout_accuracy": acc, "levels": levels,
                                           "epochs": args.epochs, "seed": args.seed,
                                           "train_images": len(train_part),
                                           "heldout_images": len(heldout)})
    print(f"held-out accuracy {acc:.4f} ({len(heldout)} images); weights in {args.out}")
    return 0

def _bench_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", default="image",
                   help="shipped model name or a model folder (default: the shipped one)")
    p.add_argument("--classifier", default="digit_classifier",
                   help="shipped classifier name or a classifier folder (the metrics' features)")
    p.add_argument("--n", type=int, default=500, help="samples per sampler (classes in turn)")
    add_presets_arg(p)
    p.add_argument("--samplers", nargs="+", default=None, metavar="SPEC",
                   help="sampler specs NAME[:K=V,...][+verify[=T]] (default: every sampler)")
    p.add_argument("--temperatures", default="1.0",
                   help="comma-separated token temperatures (default: 1.0)")
    add_confidence_arg(p)
    p.add_argument("--rounds", type=int, default=200, help="bootstrap resamples")
    add_seed_arg(p)
    add_threads_arg(p)
    add_engine_args(p, gpus=False)
    add_cache_arg(p)
    p.add_argument("--json", default=None, help="also write the results to this JSON file")
    p.add_argument("--grid", default=None, metavar="F.png",
                   help="write a PNG with one row of samples per sampler")
    p.add_argument("--quiet", action="store_true", help="no progress bar")


@command("image", "bench",
         help="benchmark every sampler on class-conditional digits: FID, IS, class accuracy, "
              "NFE, wall time")
@arguments(_bench_args)
def bench_image(args: argparse.Namespace) -> int:
    import json

    if args.n < 2:
        raise UnmaskError(f"--n: must be >= 2, got {args.n}")
    if args.rounds < 2:
        raise UnmaskError(f"--rounds: must be >= 2, got {args.rounds}")
    engine, _ = engine_from_args(args)
    temperatures = temperatures_arg(args.temperatures)
    json_path = output_path(args.json, "--json") if args.json else None
    grid_path = output_path(args.grid, "--grid", (".png",))
    folder = model_folder(args.model, "image")
    model = load_digits_model(folder)
    levels = levels_of(model)
    classifier = DigitClassifier.from_pretrained(model_folder(args.classifier,
                                                              "digit_classifier"))
    entries = with_frequencies(bench_entries(args.samplers, DEFAULT_SPECS, presets=args.preset),
                               frequencies_of(model))
    total = len(entries) * len(temperatures)
    with progress_bar(total, "decoding", enabled=not args.quiet) as update:
        rows, real, samples = run_image_bench(model, classifier, entries, args.n, temperatures,
                                              args.seed, args.rounds, progress=update,
                                              confidence=args.confidence, engine=engine,
                                              cache=args.cache,
                                              recipe=ModelRecipe(str(folder),
                                                                 loader=load_digits_model))
    source = describe_source(folder)
    print_table(rows, real, f"{source}, {args.n} samples")
    if json_path is not None:
        atomic_write_text(json_path, json.dumps(
            {"model": source, "classifier": describe_source(model_folder(
                args.classifier, "digit_classifier")), "n": args.n, "seed": args.seed,
             "real": real, "rows": rows}, indent=2) + "\n")
    if grid_path is not None:
        write_grid(samples, levels, grid_path)
    return 0


def print_table(rows: list[dict], real: dict, title: str) -> None:
    from rich.table import Table

    table = Table(title=f"class-conditional digits — {title}")
    table.add_column("sampler", no_wrap=True)
    for col in ("FID", "FID - first", "IS", "class acc %", "NFE", "tok/pass", "wall s"):
        table.add_column(col, justify="right")
    for key in ("floor", "ceiling"):
        r = real[key]
        table.add_row(f"(real {key})", f"{r['fid']:.1f} ± {r['fid_se']:.1f}", "-",
                      f"{r['inception_score']:.2f} ± {r['inception_score_se']:.2f}",
                      f"{100 * r['class_accuracy']:.1f}", "-", "-", "-")
    for r in rows:
        table.add_row(r["label"], f"{r['fid']:.1f} ± {r['fid_se']:.1f}",
                      f"{r['fid_vs_first']:+.1f} ± {r['fid_vs_first_se']:.1f}",
                      f"{r['inception_score']:.2f} ± {r['inception_score_se']:.2f}",
                      f"{100 * r['class_accuracy']:.1f} ± {100 * r['class_accuracy_se']:.1f}",
                      f"{r['nfe']:.1f}", f"{r['tokens_per_forward']:.2f}", f"{r['wall_s']:.1f}")
    wide_console(table).print(table)
