"""Argument types and the small flags many commands share. argparse turns an
:class:`argparse.ArgumentTypeError` into one line ``argument --x: ...`` and exit 2; the numeric
types live in :mod:`unmask.validation` and are re-exported here, so that this module is the
``types`` a bench task's ``add_arguments(p, types)`` is given."""

from __future__ import annotations

import argparse
import ast
import contextlib
import functools
import importlib.util
import math
import re
from pathlib import Path

from unmask.errors import UnmaskError
from unmask.validation import (  # noqa: F401  (the argument types, re-exported)
    finite_float,
    int_at_least,
    non_negative_int,
    positive_int,
    seed_int,
)


@functools.cache
def _source(module: str) -> list[str]:
    """The lines of ``module``'s source, read without importing it (its package is)."""
    spec = importlib.util.find_spec(module)
    return Path(spec.origin).read_text(encoding="utf-8").splitlines()


def _named(where: str) -> ast.AST:
    """The top-level statement ``"module:NAME"`` names (a class, a function, an assignment),
    parsed alone: its lines run from the one that names it to the next top-level line."""
    module, name = where.split(":")
    lines = _source(module)
    head = re.compile(rf"(class|def)\s+{name}\b|{name}\s*[:=]")
    for i, line in enumerate(lines):
        if head.match(line):
            end = next((j for j in range(i + 1, len(lines)) if lines[j][:1] not in
                        ("", " ", "\t", ")", "]", "}", "#")), len(lines))
            return ast.parse("\n".join(lines[i:end])).body[0]
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


@contextlib.contextmanager
def flags_for(*names: str):
    """Around a library call made with flags' values: a refusal that names one of the call's
    arguments (``block_length: ...``) names its flag instead (``--block-length: ...``)."""
    try:
        yield
    except UnmaskError as e:
        text = str(e)
        for name in names:
            if text.startswith(f"{name}: "):
                raise UnmaskError(f"--{name.replace('_', '-')}: {text[len(name) + 2:]}"
                                  ) from None
        raise


def add_pass_args(p: argparse.ArgumentParser) -> None:
    """``--batch-invariant`` and ``--compile``: how the model's passes run (docs/gpu.md)."""
    p.add_argument("--batch-invariant", action="store_true",
                   help="each row's tokens are those it gets alone, bit for bit (the model "
                        "runs one row at a time; slower)")
    p.add_argument("--compile", action="store_true",
                   help="run the model under torch.compile (CUDA graphs on a GPU; the first "
                        "passes of each shape compile)")
