"""The corrector's flags (for sampler specs ending in ``+corrector``), the corrector and
hooks they describe, and how a worker rebuilds them."""

from __future__ import annotations

import argparse

from unmask.commands.arg_types import default_of
from unmask.corrector import load_corrector
from unmask.errors import UnmaskError
from unmask.hooks import corrector_hooks
from unmask.sweep import CorrectorRecipe
from unmask.validation import finite_float, non_negative_int


def add_corrector_args(p: argparse.ArgumentParser) -> None:
    """The corrector's flags, for commands whose sampler specs may end in '+corrector'
    (defaults read from :func:`unmask.hooks.corrector_hooks`)."""
    p.add_argument("--corrector", default=None, metavar="PATH",
                   help="corrector folder for specs ending in '+corrector' (default: the "
                        "shipped one)")
    p.add_argument("--remask-threshold", type=finite_float(),
                   default=default_of(corrector_hooks, "threshold"),
                   help="with a corrector: remask decoded tokens it finds wrong with a "
                        "probability above this (default %(default)s)")
    p.add_argument("--max-remasks", type=non_negative_int,
                   default=default_of(corrector_hooks, "max_remasks"),
                   help="with a corrector: times one cell may be remasked (default "
                        "%(default)s)")
    p.add_argument("--ban-remasked", action="store_true",
                   help="with a corrector: a token it sent back is not proposed at that cell "
                        "again")


def corrector_recipe(args: argparse.Namespace, corrector) -> CorrectorRecipe | None:
    """How a worker rebuilds the corrector of :func:`corrector_from_args` (None without
    one)."""
    if corrector is None:
        return None
    return CorrectorRecipe(args.corrector, threshold=args.remask_threshold,
                           max_remasks=args.max_remasks, ban_remasked=args.ban_remasked)


def corrector_from_args(args: argparse.Namespace, model, corrected: bool):
    """(corrector or None, its decode hooks) for ``model``, from :func:`add_corrector_args`'
    flags; ``corrected``: whether any sampler spec ends in '+corrector' (a --corrector without
    one is refused)."""
    if not corrected:
        if args.corrector:
            raise UnmaskError("--corrector: no sampler spec ends in '+corrector'")
        return None, ()
    corrector = load_corrector(args.corrector, model=model)
    return corrector, corrector_hooks(corrector, threshold=args.remask_threshold,
                                      max_remasks=args.max_remasks,
                                      ban_remasked=args.ban_remasked)
