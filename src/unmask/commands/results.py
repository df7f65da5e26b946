"""``unmask results plot|pool``: Pareto plots and pooled tables of bench JSON files."""

from __future__ import annotations

import argparse

from unmask.bench.report import plot_bench, pool_bench
from unmask.commands.registry import command


@command("results", "plot")
def results_plot_cmd(args: argparse.Namespace) -> int:
    n = plot_bench(args.json, args.out, x=args.x,
                   xlim=tuple(args.xlim) if args.xlim else None,
                   ylim=tuple(args.ylim) if args.ylim else None, target=args.target,
                   references=args.references, tags=args.tags, samplers=args.samplers,
                   title=args.title)
    print(f"plot: {args.out} ({n} rows)")
    return 0


@command("results", "pool")
def results_pool_cmd(args: argparse.Namespace) -> int:
    pooled = pool_bench(args.json, args.out, quiet=args.quiet)
    print(f"pooled: {args.out} ({len(pooled['rows'])} rows, {pooled['puzzles']} puzzles)")
    return 0
