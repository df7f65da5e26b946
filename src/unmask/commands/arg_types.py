"""Argument types and the small flags many commands share. argparse turns an
:class:`argparse.ArgumentTypeError` into one line ``argument --x: ...`` and exit 2; the numeric
types live in :mod:`unmask.validation` and are re-exported here, so that this module is the
``types`` a bench task's ``add_arguments(p, types)`` is given."""

from __future__ import annotations

import argparse
import dataclasses
import inspect
import math

from unmask.decode import CONFIDENCE
from unmask.validation import (  # noqa: F401  (the argument types, re-exported)
    finite_float,
    int_at_least,
    non_negative_int,
    positive_int,
    seed_int,
)


def default_of(cls, name: str):
    """The default of field ``name`` of dataclass ``cls``, or of keyword parameter ``name``
    of function ``cls`` (so a flag's default is read from what it configures, never
    copied)."""
    if not dataclasses.is_dataclass(cls):
        param = inspect.signature(cls).parameters.get(name)
        if param is None or param.default is inspect.Parameter.empty:
            raise KeyError(f"{cls.__name__} has no defaulted parameter {name!r}")
        return param.default
    for f in dataclasses.fields(cls):
        if f.name == name:
            if f.default is not dataclasses.MISSING:
                return f.default
            if f.default_factory is not dataclasses.MISSING:
                return f.default_factory()
    raise KeyError(f"{cls.__name__} has no defaulted field {name!r}")


def temperatures_type(text: str) -> tuple[float, ...]:
    """An argparse type (``--temperatures``): comma-separated numbers >= 0."""
    try:
        values = tuple(float(t) for t in text.split(",") if t.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated numbers, got {text!r}") \
            from None
    if not values or any(not (t >= 0 and math.isfinite(t)) for t in values):
        raise argparse.ArgumentTypeError(f"expected finite numbers >= 0, got {text!r}")
    return values


def add_seed_arg(p: argparse.ArgumentParser, help: str = "random seed (default 0)") -> None:
    p.add_argument("--seed", type=seed_int, default=0, help=help)


def add_confidence_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--confidence", choices=CONFIDENCE, default="draw",
                   help="what confidence-type rules rank by when sampling: the drawn token's "
                        "probability (draw, default) or the largest probability (max)")


def add_pass_args(p: argparse.ArgumentParser) -> None:
    """``--batch-invariant`` and ``--compile``: how the model's passes run (docs/gpu.md)."""
    p.add_argument("--batch-invariant", action="store_true",
                   help="each row's tokens are those it gets alone, bit for bit (the model "
                        "runs one row at a time; slower)")
    p.add_argument("--compile", action="store_true",
                   help="run the model under torch.compile (CUDA graphs on a GPU; the first "
                        "passes of each shape compile)")
