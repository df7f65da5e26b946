"""``unmask arithmetic train`` and ``unmask arithmetic bench``: the multiplication task."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from unmask.arithmetic.bench import TASKS, default_entries, run_bench
from unmask.arithmetic.format import EquationFormat
from unmask.arithmetic.train import (
    arithmetic_model_config,
    format_of,
    training_batch,
    training_metrics,
)
from unmask.bench import aup, wide_console
from unmask.commands.common import (
    JSON_SUFFIXES,
    add_cache_arg,
    add_engine_args,
    add_presets_arg,
    add_seed_arg,
    add_threads_arg,
    add_training_args,
    engine_from_args,
    finite_float,
    output_path,
    positive_int,
    progress_bar,
    sampler_entry,
    training_setup,
)
from unmask.commands.registry import arguments, command
from unmask.errors import UnmaskError
from unmask.io import atomic_write_text
from unmask.models.auto import load_model
from unmask.models.transformer import MDMTransformer
from unmask.presets import preset_entry
from unmask.pretrained import describe_source
from unmask.sweep import ModelRecipe
from unmask.training import train


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


def _bench_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", default="arithmetic",
                   help="shipped model name or a model folder (default: the shipped one)")
    p.add_argument("--prompts", type=positive_int, default=500, help="inputs per task")
    p.add_argument("--tasks", default="generate,product,factors",
                   help="comma-separated: generate, product (factors given), factors "
                        "(product given)")
    add_presets_arg(p)
    p.add_argument("--samplers", nargs="+", default=None, metavar="SPEC",
                   help="sampler specs NAME[:K=V,K=V][+verify[=T]]; a bare name or a label of "
                        "the default comparison keeps those rows (default: all of them)")
    p.add_argument("--temperature", type=finite_float(0.0), default=1.0,
                   help="token temperature of unconditional generation")
    add_seed_arg(p)
    add_threads_arg(p)
    add_engine_args(p, gpus=False)
    add_cache_arg(p)
    p.add_argument("--json", default=None, metavar="OUT.json",
                   help="also write the results to this JSON file")
    p.add_argument("--quiet", action="store_true", help="no progress bar")


@command("arithmetic", "bench",
         help="benchmark every sampler on multiplication: accuracy, NFE, sequences, entropy")
@arguments(_bench_args)
def bench_arithmetic(args: argparse.Namespace) -> int:
    engine, _ = engine_from_args(args)
    json_path = output_path(args.json, "--json", JSON_SUFFIXES)
    tasks = tuple(t.strip() for t in args.tasks.split(",") if t.strip())
    if not tasks:
        raise UnmaskError(f"--tasks: no task given; choose from {', '.join(TASKS)}")
    unknown = [t for t in tasks if t not in TASKS]
    if unknown:
        raise UnmaskError(f"--tasks: unknown {unknown[0]!r}; choose from {', '.join(TASKS)}")
    model = load_model(args.model or "arithmetic", task="arithmetic")
    task = getattr(getattr(model, "config", None), "task", None)
    if not (isinstance(task, str) and task.startswith("multiplication-")):
        raise UnmaskError(f"--model: a {task or 'task-less'} model, this command needs a "
                          "multiplication model")
    fmt = format_of(model)
    entries = default_entries(fmt)
    if args.samplers is not None:
        chosen = []
        for spec in args.samplers:
            named = [e for e in entries if spec in (e.name, e.label)]
            chosen.extend(named or [sampler_entry(spec, "--samplers")])
        entries = [e for k, e in enumerate(chosen) if all(e is not c for c in chosen[:k])]
    if args.preset:
        entries = (entries if args.samplers is not None else []) + [
            preset_entry(name) for name in args.preset]
    with progress_bar(len(tasks) * len(entries), "decoding", enabled=not args.quiet) as update:
        rows = run_bench(model, fmt, entries, tasks, args.prompts, args.temperature, args.seed,
                         progress=update, engine=engine, cache=args.cache,
                         recipe=ModelRecipe(args.model or "arithmetic", task="arithmetic",
                                            bf16=model.autocast_bf16))
    source = describe_source(model.source)
    scores = print_tables(rows, f"{source}, {fmt.a_digits}x{fmt.b_digits}-digit factors")
    if json_path is not None:
        atomic_write_text(json_path, json.dumps({"model": source, "aup": scores,
                                                 "rows": rows}, indent=2) + "\n")
    return 0


TASK_TITLES = {"generate": "unconditional generation", "product": "factors given -> product",
               "factors": "product given -> factors"}


def _number(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def print_tables(rows: list[dict], source: str) -> dict[str, float | None]:
    """One table per task, each followed by its AUP line; returns {task: AUP}."""
    from rich.table import Table

    scores = {}
    for task in dict.fromkeys(r["task"] for r in rows):
        part = [r for r in rows if r["task"] == task]
        base = next((r["ms_per_step"] for r in part if r["sampler"] == "confidence"), None)
        t = part[0]["temperature"]
        table = Table(title=f"{TASK_TITLES.get(task, task)} ({part[0]['prompts']} prompts, "
                            f"temperature {t:g}) — {source}")
        table.add_column("sampler", no_wrap=True)
        for col in ("acc %", "format %", "NFE", "tok/pass", "seq/row", "cum H", "ms/step",
                    "vs conf", "s/solved"):
            table.add_column(col, justify="right")
        for r in part:
            ratio = f"{r['ms_per_step'] / base:.2f}x" if base else "-"
            table.add_row(r["sampler"], f"{100 * r['accuracy']:.1f}",
                          f"{100 * r['well_formed']:.1f}", f"{r['nfe']:.2f}",
                          _number(r["tokens_per_pass"], ".2f"), f"{r['sequences']:.1f}",
                          f"{r['cumulative_entropy']:.3f}", f"{r['ms_per_step']:.2f}", ratio,
                          _number(r["wall_per_solved"], ".2g"))
        wide_console(table).print(table)
        scores[task] = aup(part, y="accuracy")
        if scores[task] is not None:
            print(f"AUP over these rows: {scores[task]:.1f} (accuracy-weighted area under "
                  f"acc % vs tokens per pass, d3LLM)")
    return scores
