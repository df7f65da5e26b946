"""Benchmark samplers on class-conditional digits: FID, IS-style score and class accuracy of
the samples (on :class:`~unmask.image.classifier.DigitClassifier`), and what decoding cost."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import torch

from unmask.bench.contract import BenchContext, BenchResult, BenchRow
from unmask.bench.recipe import ModelRecipe
from unmask.bench.rows import add_rate_metrics
from unmask.bench.sweep import Run, Warmup, sweep
from unmask.bench.table import wide_console
from unmask.decode import DecodeConfig
from unmask.errors import require
from unmask.image.bench_task import ImageBench, ImageBenchTask
from unmask.image.classifier import DigitClassifier
from unmask.image.data import (
    N_CLASSES,
    N_PIXELS,
    SIDE,
    decode_tokens,
    levels_of,
    load_digits_split,
    prompts,
    to_unit,
)
from unmask.image.metrics import gaussian_stats, paired_fid_difference, sample_metrics
from unmask.image.model import load_digits_model
from unmask.io import atomic_path, output_path
from unmask.models.transformer import MDMTransformer
from unmask.parallel.workers import Engine
from unmask.pretrained import describe_source, model_folder
from unmask.samplers.pc import frequency_table
from unmask.samplers.spec import SamplerSpec
from unmask.validation import is_int


def with_frequencies(entries: list[SamplerSpec], frequencies: torch.Tensor) -> list[SamplerSpec]:
    """``entries`` with ``frequencies`` (the training pixels' grey-level frequencies) given to
    every ``pc`` entry without its own table."""
    for e in entries:
        if e.name == "pc" and "frequencies" not in e.params:
            e.params["frequencies"] = frequencies
    return entries


def class_labels(n: int) -> torch.Tensor:
    """(n,) the classes asked for: 0..9 in turn, so every class is asked about equally."""
    return torch.arange(n) % N_CLASSES


def real_reference(model: MDMTransformer, classifier: DigitClassifier, n: int,
                   seed: int = 0, rounds: int = 200) -> tuple[tuple, dict]:
    """The held-out digits' feature statistics (the FID reference) and what the metric reads
    on real and on destroyed data: ``floor`` = ``n`` training images (drawn at random) against
    the held-out ones, ``ceiling`` = the same images with their pixels shuffled."""
    levels = levels_of(model)
    train_part, heldout = load_digits_split(levels)
    feats, _ = classifier.embed(heldout.images())
    reference = gaussian_stats(feats)
    rng = np.random.default_rng([seed, 31])
    pick = torch.from_numpy(rng.choice(len(train_part), min(n, len(train_part)),
                                       replace=False))
    pixels, labels = train_part.pixels[pick], train_part.labels[pick]
    shuffled = torch.gather(pixels, 1, torch.from_numpy(
        np.stack([rng.permutation(N_PIXELS) for _ in range(len(pick))])))
    out = {"heldout_images": len(heldout), "real_images": len(pick)}
    for key, px in (("floor", pixels), ("ceiling", shuffled)):
        f, p = classifier.embed(to_unit(px, levels))
        out[key] = sample_metrics(f, p, labels, reference, rounds=rounds, seed=seed)
    return reference, out


def run_bench(model: MDMTransformer, classifier: DigitClassifier,
                    entries: list[SamplerSpec], n: int = 500,
                    temperatures: tuple[float, ...] = (1.0,), seed: int = 0,
                    rounds: int = 200, progress=None, confidence: str = "draw",
                    engine: Engine | None = None, recipe: ModelRecipe | None = None,
                    cache=None) -> tuple[list[BenchRow], dict, dict]:
    """Decode ``n`` class-conditional digits (classes 0..9 in turn) with every entry at every
    temperature (``confidence``: :class:`~unmask.decode.DecodeConfig`; rows decoded with
    ``"max"`` say so in their label), one run per (temperature, entry) on ``engine``
    (:func:`unmask.bench.sweep.sweep`; ``recipe`` tells a Ray engine's workers how to load the
    model, e.g. ``ModelRecipe(path, loader=load_digits_model)``; ``cache`` a folder of
    finished shards).

    Returns (rows, real, samples): one :class:`unmask.bench.contract.BenchRow` per (entry,
    temperature), its accuracy the class accuracy, with mean nfe, mean sequences evaluated,
    wall seconds, n_items (``n``), :func:`unmask.bench.rows.add_rate_metrics`' rates, and the
    columns fid, inception_score, class_accuracy (each with a bootstrap ``_se`` over the
    samples), ``fid_vs_first`` (its FID minus the first row's at the same temperature, with
    the paired bootstrap error ``fid_vs_first_se``:
    :func:`~unmask.image.metrics.paired_fid_difference`), nfe's standard error ``nfe_se``,
    tokens_per_forward (64 / mean nfe), revealed (64); ``real``
    the metric's floor and ceiling (:func:`real_reference`); ``samples`` label -> pixel
    levels (n, 64) of each row.
    """
    require(is_int(n) and n >= 2, f"n: must be an integer >= 2, got {n!r}")
    require(len(temperatures) >= 1, "temperatures: need at least one")
    for t in temperatures:
        require(t >= 0, f"temperatures: must be >= 0, got {t}")
    levels = levels_of(model)
    reference, real = real_reference(model, classifier, n, seed, rounds)
    labels = class_labels(n)
    x = prompts(labels, levels)
    configs = [DecodeConfig(temperature=t, confidence=confidence) for t in temperatures]
    runs = [Run(entry, x, cfg, seed * n) for cfg in configs for entry in entries]
    # one untimed decode first on each worker: the first model call pays one-off set-up costs
    results = iter(sweep(runs, model, batch_size=n, engine=engine, recipe=recipe,
                         warmup=Warmup(x[:2], "confidence"), progress=progress,
                         cache=cache))
    rows, samples = [], {}
    for temperature in temperatures:
        first = None
        for entry in entries:
            res, wall = next(results)
            pixels, _ = decode_tokens(res.tokens, levels)
            feats, probs = classifier.embed(to_unit(pixels, levels))
            first = feats if first is None else first
            diff, diff_se = paired_fid_difference(feats, first, reference, rounds=rounds,
                                                  seed=seed)
            metrics = {**sample_metrics(feats, probs, labels, reference, rounds=rounds,
                                        seed=seed),
                       "fid_vs_first": diff, "fid_vs_first_se": diff_se}
            label = entry.label if len(temperatures) == 1 else f"{entry.label} T={temperature:g}"
            label += " conf=max" if confidence == "max" else ""
            rows.append(_row(label, entry, res, wall, temperature, confidence, metrics))
            samples[label] = pixels
    add_rate_metrics(rows)
    return rows, real, samples


def _row(label: str, entry: SamplerSpec, res, wall: float, temperature: float,
         confidence: str, metrics: dict) -> BenchRow:
    """One (entry, temperature) row of :func:`run_bench`: the samples' ``metrics``
    and what decoding them cost."""
    nfe, n = res.nfe.double(), len(res.nfe)
    return BenchRow(
        label, entry.name, metrics["class_accuracy"], nfe=float(nfe.mean()),
        sequences=float(res.sequences.double().mean()), wall_s=wall, n_items=n,
        columns={"sampler": entry.label,
                 "params": {k: v for k, v in entry.params.items() if k != "frequencies"},
                 "verified": entry.verified, "temperature": temperature, "n": n,
                 "confidence": confidence, **metrics,
                 "nfe_se": float(nfe.std() / np.sqrt(n)),
                 "tokens_per_forward": N_PIXELS / float(nfe.mean()), "revealed": N_PIXELS})


def frequencies_of(model: MDMTransformer) -> torch.Tensor:
    """(V,) grey-level frequencies of the training pixels (the PC-Sampler's corpus table)."""
    train_part, _ = load_digits_split(levels_of(model))
    return frequency_table(train_part.pixels, model.vocab_size, ignore=model.mask_id)


def write_grid(samples: dict[str, torch.Tensor], levels: int, path: str | Path,
               per_row: int = 2 * N_CLASSES) -> None:
    """A PNG with one row of samples per sampler (the first ``per_row``: classes 0..9 in
    turn), its label at the left."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = list(samples)
    cols = min(per_row, min(len(s) for s in samples.values()))
    fig, axes = plt.subplots(len(labels), 1, figsize=(0.45 * cols + 2.2, 0.5 * len(labels) + 0.2),
                             squeeze=False)
    for ax, label in zip(axes[:, 0], labels, strict=True):
        imgs = to_unit(samples[label][:cols], levels).numpy()
        strip = np.concatenate([np.pad(im, ((0, 0), (0, 1)), constant_values=0.5)
                                for im in imgs], axis=1)
        ax.imshow(strip, cmap="gray_r", vmin=0, vmax=1, interpolation="nearest",
                  aspect="equal", extent=(0, cols * (SIDE + 1), 0, SIDE))
        ax.set_xticks([])
        ax.set_yticks([])
        ax.set_ylabel(label, rotation=0, ha="right", va="center", fontsize=7)
    fig.subplots_adjust(left=0.2, right=0.99, top=0.99, bottom=0.01, hspace=0.15)
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=110)
    plt.close(fig)


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
                      f"{r['nfe']:.1f}", f"{r['tokens_per_pass']:.2f}", f"{r['wall_s']:.1f}")
    wide_console(table).print(table)


class ImageBenchRunner(ImageBenchTask):
    """Every sampler on class-conditional digits: FID, IS-style score and class accuracy of
    the samples against forward passes; the accuracy is the class accuracy."""

    def check(self, options: ImageBench) -> ImageBench:
        grid = output_path(options.grid, "--grid", (".png",))
        return dataclasses.replace(options, grid=None if grid is None else str(grid))

    def load_model(self, options: ImageBench, device):
        return load_digits_model(model_folder(options.model, "image")).to(device)

    def recipe(self, options: ImageBench, model, device):
        return ModelRecipe(str(model_folder(options.model, "image")), loader=load_digits_model,
                           device=device.type)

    def entries(self, model, specs, parse) -> list[SamplerSpec]:
        return with_frequencies(super().entries(model, specs, parse), frequencies_of(model))

    def run(self, ctx: BenchContext) -> BenchResult:
        opts = ctx.options
        folder = model_folder(opts.classifier, "digit_classifier")
        classifier = DigitClassifier.from_pretrained(folder)
        rows, real, samples = run_bench(
            ctx.model, classifier, ctx.entries, ctx.limit, ctx.temperatures, ctx.seed,
            opts.rounds, confidence=opts.confidence, **ctx.sweep)
        header = {"model": describe_source(model_folder(opts.model, "image")),
                  "classifier": describe_source(folder), "n": ctx.limit, "real": real}
        return BenchResult(rows, header,
                           extras={"samples": samples})

    def report(self, ctx: BenchContext, result: BenchResult) -> None:
        print_table(result.dicts(), result.header["real"],
                    f"{result.header['model']}, {ctx.limit} samples")

    def write_outputs(self, ctx: BenchContext, result: BenchResult) -> None:
        if ctx.options.grid is not None:
            write_grid(result.extras["samples"], levels_of(ctx.model), ctx.options.grid)


BENCH_TASK = ImageBenchRunner()
