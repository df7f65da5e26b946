"""The flags of ``unmask results plot|pool`` (:mod:`unmask.commands.results`)."""

from __future__ import annotations

import argparse

from unmask.commands.flags.threads import add_threads_arg
from unmask.commands.flags.types import finite_float, literal_of


def plot(p: argparse.ArgumentParser) -> None:
    p.add_argument("json", nargs="+", help="bench JSON files of one puzzle set "
                   "(unmask sudoku bench --json, or unmask results pool)")
    p.add_argument("--out", required=True, help="picture to write (.png, .pdf or .svg)")
    p.add_argument("--x", choices=list(literal_of("unmask.bench.report:X_AXES")), default="passes",
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


def pool(p: argparse.ArgumentParser) -> None:
    p.add_argument("json", nargs="+", help="bench JSON files, two or more puzzle sets "
                   "(files of one set are merged, the first row of a label kept)")
    p.add_argument("--out", required=True, help="pooled bench JSON to write (.json)")
    p.add_argument("--quiet", action="store_true", help="do not print the table")
    add_threads_arg(p)
