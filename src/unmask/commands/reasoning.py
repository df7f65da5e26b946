"""``unmask reasoning train`` and ``unmask reasoning bench``: the text MDM on reasoning-gym
tasks."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from unmask.bench import pareto_plot, render_table
from unmask.commands.common import (
    add_cache_arg,
    add_confidence_arg,
    add_engine_args,
    add_presets_arg,
    add_resume_args,
    add_seed_arg,
    add_threads_arg,
    bench_entries,
    check_resume_args,
    engine_from_args,
    finite_float,
    output_folder,
    output_path,
    positive_int,
    progress_bar,
    temperatures_arg,
)
from unmask.commands.registry import arguments, command
from unmask.errors import UnmaskError
from unmask.io import atomic_write_text
from unmask.models.auto import load_model
from unmask.reasoning.bench import (
    DEFAULT_SPECS,
    POOLED,
    aup_by_temperature,
    n_batches,
    run_reasoning_bench,
)
from unmask.reasoning.tasks import TASKS, get_tasks
from unmask.reasoning.train import ReasoningData, TextModelConfig, train_text_mdm
from unmask.sweep import ModelRecipe
from unmask.training import LoopConfig


def _train_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", default="runs/reasoning",
                   help="run folder (checkpoints, best/; default runs/reasoning)")
    add_resume_args(p)
    p.add_argument("--steps", type=positive_int, default=40_000)
    p.add_argument("--batch-size", type=positive_int, default=64)
    p.add_argument("--lr", type=finite_float(0.0, open_low=True), default=1e-3)
    p.add_argument("--eval-every", type=positive_int, default=500)
    p.add_argument("--max-time", type=finite_float(0.0, open_low=True), default=7200.0,
                   help="seconds of training over all resumes; the learning rate decays over "
                        "whichever budget, steps or time, runs out first (default 7200)")
    p.add_argument("--pool", type=positive_int, default=ReasoningData.pool,
                   help=f"training problems per task (default {ReasoningData.pool})")
    p.add_argument("--tasks", nargs="+", default=None, choices=list(TASKS), metavar="TASK",
                   help="train on these tasks (default all)")
    add_seed_arg(p)
    add_threads_arg(p)
    p.add_argument("--no-bf16", action="store_true")


@command("reasoning", "train",
         help="train the character-level text MDM on the reasoning tasks (checkpoints, "
              "--resume)")
@arguments(_train_args)
def train_reasoning(args: argparse.Namespace) -> int:
    output_folder(args.out, "--out")
    check_resume_args(args)
    tasks = tuple(t.name for t in get_tasks(args.tasks))
    weights = dict(zip(ReasoningData.tasks, ReasoningData.weights, strict=True))
    data = ReasoningData(tasks, tuple(weights[t] for t in tasks), args.pool)
    loop = LoopConfig(total_steps=args.steps, lr=args.lr, min_lr=5e-5, warmup_steps=500,
                      eval_every=args.eval_every, metric="accuracy", higher_is_better=True,
                      max_time_s=args.max_time, decay_by_time=True, checkpoint_every_s=300,
                      grad_clip=1.0, batch_size=args.batch_size)
    train_text_mdm(args.out, loop, batch_size=args.batch_size, model_config=TextModelConfig(),
                   data=data, seed=args.seed, bf16=not args.no_bf16, resume=args.resume,
                       overwrite=args.overwrite,
                   override=args.override_config, log=lambda s: print(s, flush=True))
    print(f"best weights: {Path(args.out) / 'best'}")
    return 0


def _bench_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", default="text",
                   help="shipped model name or a transformers folder (default: the shipped "
                        "text MDM)")
    p.add_argument("--tasks", nargs="+", default=None, metavar="TASK",
                   help=f"tasks to run (default all: {', '.join(TASKS)})")
    p.add_argument("--limit", type=int, default=100, help="problems per task (default 100)")
    add_presets_arg(p)
    p.add_argument("--samplers", nargs="+", default=None, metavar="SPEC",
                   help="sampler specs NAME[:K=V,...][+verify[=T]] (default: every sampler "
                        "that needs no extra file, plus verified variants)")
    p.add_argument("--temperatures", default="0",
                   help="comma-separated token temperatures, e.g. 0,0.5,1.0,1.5 (default 0)")
    add_confidence_arg(p)
    add_seed_arg(p, help="generator seed of the problems (default 0; the problems of seed S "
                         "are S..S+limit-1)")
    add_threads_arg(p)
    add_engine_args(p, gpus=False)
    add_cache_arg(p)
    p.add_argument("--json", default=None, help="also write the rows to this JSON file")
    p.add_argument("--plot", default=None, metavar="F.png",
                   help="pooled accuracy against tokens per forward pass, a point per "
                        "sampler and temperature")
    p.add_argument("--quiet", action="store_true", help="no progress bar")


@command("reasoning", "bench",
         help="benchmark samplers on the reasoning tasks: accuracy by each task's verifier, "
              "NFE, tokens per pass, cumulative entropy, wall time, AUP")
@arguments(_bench_args)
def bench_reasoning(args: argparse.Namespace) -> int:
    engine, _ = engine_from_args(args)
    if args.limit < 1:
        raise UnmaskError(f"--limit: must be >= 1, got {args.limit}")
    tasks = get_tasks(args.tasks, "--tasks")
    temperatures = temperatures_arg(args.temperatures)
    json_path = output_path(args.json, "--json") if args.json else None
    plot_path = output_path(args.plot, "--plot", (".png",)) if args.plot else None
    entries = bench_entries(args.samplers, DEFAULT_SPECS, presets=args.preset)
    model = load_model(args.model, task="text")
    total = n_batches(len(tasks), args.limit, len(entries), len(temperatures))
    with progress_bar(total, "decoding", enabled=not args.quiet) as update:
        rows = run_reasoning_bench(model, tasks, entries, args.limit, temperatures, args.seed,
                                   progress=update, confidence=args.confidence, engine=engine,
                                   recipe=ModelRecipe(args.model, task="text"),
                                   cache=args.cache)
    aups = aup_by_temperature(rows)
    print_tables(rows, aups, f"{model.source}, {args.limit} problems per task, seed "
                             f"{args.seed}")
    if json_path is not None:
        atomic_write_text(json_path, json.dumps(
            {"model": str(model.source), "tasks": [t.name for t in tasks],
             "limit": args.limit, "seed": args.seed, "temperatures": list(temperatures),
             "confidence": args.confidence,
             "aup": {str(t): a for t, a in aups.items()}, "rows": rows}, indent=2) + "\n")
    if plot_path is not None:
        plot_pooled(rows, plot_path)
    return 0


def print_tables(rows: list[dict], aups: dict, title: str) -> None:
    shown = [dict(r, accuracy_pct=100 * r["accuracy"],
                  vs_seq=None if r.get("gained_vs_ref") is None
                  else f"+{r['gained_vs_ref']}/-{r['lost_vs_ref']}") for r in rows]
    tasks = list(dict.fromkeys(r["task"] for r in rows))
    columns = [("sampler", "label", ""), ("acc %", "accuracy_pct", ".1f"),
               ("NFE", "nfe", ".1f"), ("tok/pass", "tokens_per_forward", ".2f"),
               ("seqs", "sequences", ".1f"), ("cum. H", "cumulative_entropy", ".2f"),
               ("wall s", "wall_s", ".1f"), ("vs conf.", "vs_seq", "")]
    for t, a in aups.items():
        for task in tasks:
            part = [r for r in shown if r["task"] == task and r["temperature"] == t]
            extra = f"; AUP {a:.1f}" if task == POOLED and a is not None else ""
            render_table(part, columns, f"{task}, T={t:g} — {title}{extra}")


def plot_pooled(rows: list[dict], path) -> None:
    pooled = [r for r in rows if r["task"] == POOLED]
    if len({r["temperature"] for r in pooled}) > 1:
        pooled = [dict(r, label=f"{r['label']} T={r['temperature']:g}") for r in pooled]
    pareto_plot(pooled, path, x="tokens_per_forward", y="accuracy",
                xlabel="tokens per forward pass", ylabel="accuracy %",
                title="pooled reasoning tasks")
