"""``unmask results plot|pool``: Pareto plots and pooled tables of bench JSON files."""

from __future__ import annotations

import argparse

from unmask.commands.registry import arguments, command
from unmask.commands.threads import add_threads_arg
from unmask.report import X_AXES, plot_bench, pool_bench
from unmask.validation import finite_float


def _plot_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("json", nargs="+", help="bench JSON files of one puzzle set "
                   "(unmask sudoku bench --json, or unmask results pool)")
    p.add_argument("--out", required=True, help="picture to write (.png, .pdf or .svg)")
    p.add_argument("--x", choices=list(X_AXES), default="passes",
                   help="x axis: mean forward passes or wall-clock seconds (default passes)")
    p.add_argument("--xlim", nargs=2, type=finite_float(), default=None, metavar=("LO", "HI"),
                   help="zoom: the range of the x axis drawn")
    p.add_argument("--ylim", nargs=2, type=finite_float(), default=None, metavar=("LO", "HI"),
                   help="zoom: the range of solved %% drawn")
    p.add_argument("--target", type=finite_float(0.0, open_low=True), default=None, metavar="F",
                   help="draw the 'confidence' row's solved %% and its x / F as lines "
                        "(sequential accuracy at 1/F of its passes)")
    p.add_argument("--samplers", nargs="+", default=None, metavar="LABEL",
                   help="only rows with these labels (default: all)")
    p.add_argument("--tags", nargs="+", default=None, metavar="TAG",
                   help="one per file: its rows are drawn as 'TAG sampler' lines")
    p.add_argument("--references", action="store_true",
                   help="draw the published Sudoku points (passes only)")
    p.add_argument("--title", default=None)
    add_threads_arg(p)


@command("results", "plot", help="Pareto plot (solved %% against passes or wall-clock time) "
         "of bench JSON files")
@arguments(_plot_args)
def results_plot_cmd(args: argparse.Namespace) -> int:
    n = plot_bench(args.json, args.out, x=args.x,
                   xlim=tuple(args.xlim) if args.xlim else None,
                   ylim=tuple(args.ylim) if args.ylim else None, target=args.target,
                   references=args.references, tags=args.tags, samplers=args.samplers,
                   title=args.title)
    print(f"plot: {args.out} ({n} rows)")
    return 0


def _pool_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("json", nargs="+", help="bench JSON files, two or more puzzle sets "
                   "(files of one set are merged, the first row of a label kept)")
    p.add_argument("--out", required=True, help="pooled bench JSON to write (.json)")
    p.add_argument("--quiet", action="store_true", help="do not print the table")
    add_threads_arg(p)


@command("results", "pool", help="pool bench JSON files of different puzzle sets: outcomes "
         "concatenated, paired against sequential decoding and EB's frontier")
@arguments(_pool_args)
def results_pool_cmd(args: argparse.Namespace) -> int:
    pooled = pool_bench(args.json, args.out, quiet=args.quiet)
    print(f"pooled: {args.out} ({len(pooled['rows'])} rows, {pooled['puzzles']} puzzles)")
    return 0
