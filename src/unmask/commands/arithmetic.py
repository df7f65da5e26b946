"""``unmask arithmetic train`` and ``unmask arithmetic bench``: the multiplication task."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from unmask.cli import arguments, command
from unmask.commands.common import add_training_args, training_setup


def _train_args(p: argparse.ArgumentParser) -> None:
    add_training_args(p, out="runs/arithmetic", steps=30_000, batch_size=256, lr=2e-3,
                      warmup=500, eval_every=1000)
    p.add_argument("--a-digits", type=int, default=2, help="width of the first factor")
    p.add_argument("--b-digits", type=int, default=1, help="width of the second factor")
    p.add_argument("--eval-prompts", type=int, default=256, help="prompts per direction")


@command("arithmetic", "train", help="train the multiplication MDM (checkpoints, --resume)")
@arguments(_train_args)
def train_arithmetic(args: argparse.Namespace) -> int:

    from unmask.arithmetic.format import EquationFormat
    from unmask.arithmetic.train import arithmetic_model_config, training_batch, training_metrics
    from unmask.models.transformer import MDMTransformer
    from unmask.training import train

    overrides, cfg = training_setup(args)
    fmt = EquationFormat(args.a_digits, args.b_digits)
    model = MDMTransformer(arithmetic_model_config(fmt, **overrides))
    out = Path(args.out)
    print(f"model: {sum(p.numel() for p in model.parameters()):,} parameters, "
          f"sequences of {fmt.length} tokens", flush=True)
    train(model, lambda step, bs: training_batch(fmt, step, bs, seed=args.seed), cfg, out,
          lambda m: training_metrics(m, fmt, args.eval_prompts), resume=args.resume,
          log=lambda s: print(s, flush=True))
    print(f"best weights: {out / 'best'}")
    return 0


def _bench_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", default="arithmetic",
                   help="shipped model name or a model folder (default: the shipped one)")
    p.add_argument("--prompts", type=int, default=500, help="inputs per task")
    p.add_argument("--tasks", default="generate,product,factors",
                   help="comma-separated: generate, product (factors given), factors "
                        "(product given)")
    p.add_argument("--samplers", default=None,
                   help="comma-separated sampler names or labels to keep (default: all)")
    p.add_argument("--temperature", type=float, default=1.0,
                   help="token temperature of unconditional generation")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--json", default=None, help="also write the results to this JSON file")
    p.add_argument("--quiet", action="store_true", help="no progress bar")


@command("arithmetic", "bench",
         help="benchmark every sampler on multiplication: accuracy, NFE, sequences, entropy")
@arguments(_bench_args)
def bench_arithmetic(args: argparse.Namespace) -> int:
    import torch

    from unmask.arithmetic.bench import default_entries, run_bench
    from unmask.arithmetic.train import format_of
    from unmask.commands.common import output_path, progress_bar
    from unmask.errors import UnmaskError
    from unmask.io import atomic_write_text
    from unmask.pretrained import describe_source, load_model

    if args.threads:
        torch.set_num_threads(args.threads)
    json_path = output_path(args.json, "--json") if args.json else None
    model = load_model(args.model)
    fmt = format_of(model)
    tasks = tuple(t.strip() for t in args.tasks.split(",") if t.strip())
    entries = default_entries(fmt)
    if args.samplers:
        keep = {s.strip() for s in args.samplers.split(",") if s.strip()}
        unknown = keep - {e.name for e in entries} - {e.label for e in entries}
        if unknown:
            raise UnmaskError(f"--samplers: unknown {sorted(unknown)[0]!r}; choose from "
                              f"{', '.join(sorted({e.name for e in entries}))}")
        entries = [e for e in entries if e.name in keep or e.label in keep]
    with progress_bar(len(tasks) * len(entries), "decoding", enabled=not args.quiet) as update:
        rows = run_bench(model, fmt, entries, tasks, args.prompts, args.temperature, args.seed,
                         progress=update)
    source = describe_source(model.source)
    print_tables(rows, f"{source}, {fmt.a_digits}x{fmt.b_digits}-digit factors")
    if json_path is not None:
        atomic_write_text(json_path, json.dumps({"model": source, "rows": rows},
                                                indent=2) + "\n")
    return 0


TASK_TITLES = {"generate": "unconditional generation", "product": "factors given -> product",
               "factors": "product given -> factors"}


def print_tables(rows: list[dict], source: str) -> None:
    from rich.table import Table

    from unmask.bench import wide_console

    for task in dict.fromkeys(r["task"] for r in rows):
        part = [r for r in rows if r["task"] == task]
        base = next((r["ms_per_step"] for r in part if r["sampler"] == "confidence"), None)
        t = part[0]["temperature"]
        table = Table(title=f"{TASK_TITLES.get(task, task)} ({part[0]['prompts']} prompts, "
                            f"temperature {t:g}) — {source}")
        table.add_column("sampler", no_wrap=True)
        for col in ("acc %", "format %", "NFE", "seqs", "cum H", "ms/step", "vs conf"):
            table.add_column(col, justify="right")
        for r in part:
            ratio = f"{r['ms_per_step'] / base:.2f}x" if base else "-"
            table.add_row(r["sampler"], f"{100 * r['accuracy']:.1f}",
                          f"{100 * r['well_formed']:.1f}", f"{r['nfe']:.2f}",
                          f"{r['sequences']:.1f}", f"{r['cumulative_entropy']:.3f}",
                          f"{r['ms_per_step']:.2f}", ratio)
        wide_console(table).print(table)
