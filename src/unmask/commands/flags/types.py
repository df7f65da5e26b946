"""Argument types and the small flags many commands share. argparse turns an
:class:`argparse.ArgumentTypeError` into one line ``argument --x: ...`` and exit 2; the numeric
types are :mod:`unmask.validation`'s, made argparse types here, so that this module is the
``types`` a bench task's flags are given."""

from __future__ import annotations

import argparse
import ast
import contextlib
import functools
import importlib.util
import math
import re
from pathlib import Path

from unmask import validation
from unmask.errors import UnmaskError


def argument_type(parse):
    """``parse`` (a :mod:`unmask.validation` argument type) as an argparse type: its
    :class:`~unmask.validation.InvalidText` becomes argparse's one-line refusal."""

    @functools.wraps(parse)
    def typed(text: str):
        try:
            return parse(text)
        except validation.InvalidText as e:
            raise argparse.ArgumentTypeError(str(e)) from None

    return typed


def int_at_least(low: int):
    """An argparse type: an integer >= ``low``."""
    return argument_type(validation.int_at_least(low))


def finite_float(low: float | None = None, high: float | None = None, *,
                 open_low: bool = False):
    """An argparse type: a finite float, optionally within [low, high] (``open_low``:
    (low, high])."""
    return argument_type(validation.finite_float(low, high, open_low=open_low))


positive_int = argument_type(validation.positive_int)
non_negative_int = argument_type(validation.non_negative_int)
seed_int = argument_type(validation.seed_int)


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


def add_trust_arg(p: argparse.ArgumentParser) -> None:
    """``--trust-remote-code``, for commands that load any model folder."""
    p.add_argument("--trust-remote-code", action="store_true",
                   help="run modelling code shipped inside the model folder (only from there)")


def add_folder_model_args(p: argparse.ArgumentParser) -> None:
    """``--trust-remote-code`` and ``--dtype``: how a transformers model folder loads."""
    add_trust_arg(p)
    p.add_argument("--dtype", default=None, help="float32, bfloat16 or float16")


def add_cache_kv_arg(p: argparse.ArgumentParser) -> None:
    """``--cache-kv``: Fast-dLLM's block KV cache (:class:`~unmask.decode.DecodeConfig`)."""
    p.add_argument("--cache-kv", choices=["prefix", "dual"], default=None,
                   help="Fast-dLLM's block KV cache (folders whose code takes "
                        "past_key_values, e.g. LLaDA's); approximate, see docs/models.md")
