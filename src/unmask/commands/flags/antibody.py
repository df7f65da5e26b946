"""The flags of ``unmask antibody bench`` (:mod:`unmask.commands.antibody`)."""

from __future__ import annotations

import argparse

from unmask.antibody.bench_task import DEFAULT_SETTINGS, SETTINGS
from unmask.commands.flags.bench import bench_arguments
from unmask.commands.flags.types import positive_int


def bench_flags(p: argparse.ArgumentParser, d) -> None:
    """``unmask antibody bench``'s own flags (:class:`unmask.antibody.bench_task.AntibodyBench`'s
    options, ``d`` their defaults)."""
    p.add_argument("--settings", nargs="+", default=list(d.settings),
                   choices=list(SETTINGS), metavar="SETTING",
                   help=f"of {', '.join(SETTINGS)} (default "
                        f"{' '.join(DEFAULT_SETTINGS)}: heavy needs a model of 127+ "
                        "positions, such as AntiBERTy)")
    p.add_argument("--batch-size", type=positive_int, default=d.batch_size,
                   help="sequences per decode call (default: all at once)")
    p.add_argument("--no-perplexity", action="store_true",
                   help="leave out the pseudo-perplexity (one pass per residue)")
    p.add_argument("--oracle-limit", type=positive_int, default=d.oracle_limit, metavar="N",
                   help="mi-oracle (ground-truth MI by probing, every pass) decodes the "
                        "first N cases of a setting only (default 4); its recovery is "
                        "compared with sequential's on those")


bench = bench_arguments("antibody", bench_flags)
