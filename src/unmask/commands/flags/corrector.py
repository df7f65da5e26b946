"""The corrector's flags (for sampler specs ending in ``+corrector``), the corrector and
hooks they describe, and how a worker rebuilds them; the flags of ``unmask corrector train``
(:mod:`unmask.commands.corrector`)."""

from __future__ import annotations

import argparse

from unmask.commands.flags.threads import add_threads_arg
from unmask.commands.flags.training import add_resume_args
from unmask.commands.flags.types import (
    add_seed_arg,
    default_of,
    finite_float,
    non_negative_int,
    positive_int,
    seed_int,
)
from unmask.errors import UnmaskError

#: the samplers whose decoding states ``unmask corrector train`` trains on by default
DEFAULT_STATE_SAMPLERS = ["eb:gamma=0.3,order=confidence", "eb:gamma=1.0,order=confidence",
                          "topk:k=4", "topk:k=7"]


def add_corrector_args(p: argparse.ArgumentParser) -> None:
    """The corrector's flags, for commands whose sampler specs may end in '+corrector'
    (defaults read from :func:`unmask.hooks.corrector_hooks`)."""
    p.add_argument("--corrector", default=None, metavar="PATH",
                   help="corrector folder for specs ending in '+corrector' (default: the "
                        "shipped one)")
    p.add_argument("--remask-threshold", type=finite_float(),
                   default=default_of("unmask.hooks:corrector_hooks", "threshold"),
                   help="with a corrector: remask decoded tokens it finds wrong with a "
                        "probability above this (default %(default)s)")
    p.add_argument("--max-remasks", type=non_negative_int,
                   default=default_of("unmask.hooks:corrector_hooks", "max_remasks"),
                   help="with a corrector: times one cell may be remasked (default "
                        "%(default)s)")
    p.add_argument("--ban-remasked", action="store_true",
                   help="with a corrector: a token it sent back is not proposed at that cell "
                        "again")


def corrector_from_args(args: argparse.Namespace, model, corrected: bool):
    """(corrector or None, its decode hooks) for ``model``, from :func:`add_corrector_args`'
    flags; ``corrected``: whether any sampler spec ends in '+corrector' (a --corrector without
    one is refused)."""
    if not corrected:
        if args.corrector:
            raise UnmaskError("--corrector: no sampler spec ends in '+corrector'")
        return None, ()
    from unmask.corrector import load_corrector
    from unmask.hooks import corrector_hooks

    corrector = load_corrector(args.corrector, model=model)
    return corrector, corrector_hooks(corrector, threshold=args.remask_threshold,
                                      max_remasks=args.max_remasks,
                                      ban_remasked=args.ban_remasked)


def train(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", default="runs/corrector",
                   help="run folder (best/, history.jsonl, states.pt: the decoded states, "
                        "reused by a rerun with the same data); default runs/corrector")
    p.add_argument("--model", default=None,
                   help="shipped Sudoku model name or model folder (default: the shipped one)")
    p.add_argument("--puzzles", type=positive_int, default=4000,
                   help="generated training puzzles to decode (never a test-set solution)")
    p.add_argument("--pool-seed", type=seed_int, default=5000,
                   help="seed of the generated puzzles")
    p.add_argument("--samplers", nargs="+", default=None, metavar="SPEC",
                   help="samplers whose decoding states are the training data, each on its "
                        f"share of the puzzles (default: {' '.join(DEFAULT_STATE_SAMPLERS)})")
    p.add_argument("--epochs", type=positive_int, default=30)
    p.add_argument("--patience", type=positive_int, default=4,
                   help="epochs without a lower held-out loss before stopping")
    p.add_argument("--batch-size", type=positive_int, default=64)
    p.add_argument("--lr", type=finite_float(0.0, open_low=True), default=2e-3)
    p.add_argument("--d", type=positive_int, default=64, help="width of the head")
    p.add_argument("--layers", type=positive_int, default=2,
                   help="transformer blocks of the head")
    p.add_argument("--held-out", type=finite_float(0.0, 1.0, open_low=True), default=0.1,
                   help="share of puzzles held out")
    add_seed_arg(p)
    p.add_argument("--max-time", type=finite_float(0.0, open_low=True), default=None,
                   help="stop after this many seconds")
    add_threads_arg(p)
    add_resume_args(p)
