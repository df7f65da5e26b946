"""Argument types and the small flags many commands share. argparse turns an
:class:`argparse.ArgumentTypeError` into one line ``argument --x: ...`` and exit 2; the numeric
types live in :mod:`unmask.validation` and are re-exported here, so that this module is the
``types`` a bench task's ``add_arguments(p, types)`` is given."""

from __future__ import annotations

import argparse
import ast
import functools
import importlib.util
import math
from pathlib import Path

from unmask.validation import (  # noqa: F401  (the argument types, re-exported)
    finite_float,
    int_at_least,
    non_negative_int,
    positive_int,
    seed_int,
)


@functools.cache
def _source(module: str) -> ast.Module:
    """The syntax tree of ``module``'s source, read without importing it (its package is)."""
    spec = importlib.util.find_spec(module)
    return ast.parse(Path(spec.origin).read_text(encoding="utf-8"))


def _named(where: str) -> ast.AST:
    """The top-level statement ``"module:NAME"`` names (a class, a function, an assignment)."""
    module, name = where.split(":")
    for node in _source(module).body:
        if getattr(node, "name", None) == name:
            return node
        targets = [t.id for t in getattr(node, "targets", [getattr(node, "target", None)])
                   if isinstance(t, ast.Name)]
        if name in targets:
            return node
    raise KeyError(f"{module} has no top-level {name!r}")


def literal_of(where: str):
    """The value of the module-level constant ``"module:NAME"`` (a literal), read from the
    module's source: a flag's choices come from what they configure without importing it
    (and torch with it) for ``--help``."""
    return ast.literal_eval(_named(where).value)


def default_of(where: str, name: str):
    """The default of field ``name`` of the dataclass ``"module:Class"``, or of keyword
    parameter ``name`` of the function ``"module:function"``, read from the module's source
    (so a flag's default is read from what it configures, never copied, and ``--help``
    imports neither)."""
    node = _named(where)
    if isinstance(node, ast.ClassDef):
        for stmt in node.body:
            if isinstance(stmt, ast.AnnAssign) and getattr(stmt.target, "id", None) == name \
                    and stmt.value is not None:
                value = stmt.value
                if isinstance(value, ast.Call):  # field(default=...)
                    value = next(k.value for k in value.keywords if k.arg == "default")
                return ast.literal_eval(value)
    elif isinstance(node, ast.FunctionDef):
        a = node.args
        positional = a.posonlyargs + a.args
        pairs = [*zip(positional[len(positional) - len(a.defaults):], a.defaults, strict=True),
                 *((k, d) for k, d in zip(a.kwonlyargs, a.kw_defaults, strict=True) if d)]
        for arg, default in pairs:
            if arg.arg == name:
                return ast.literal_eval(default)
    raise KeyError(f"{where} has no defaulted {name!r}")


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
    p.add_argument("--confidence", choices=literal_of("unmask.decode:CONFIDENCE"), default="draw",
                   help="what confidence-type rules rank by when sampling: the drawn token's "
                        "probability (draw, default) or the largest probability (max)")
