"""``--regex``, ``--json-schema`` and ``--choice``: the language a text command's output must
belong to (:mod:`unmask.constraints`; docs/constraints.md)."""

from __future__ import annotations

import argparse
import json

from unmask.errors import UnmaskError
from unmask.io import parse_json

#: the library's names of a constraint (its refusals start with them) -> the flag
NAMES = ("regex", "json_schema", "choice", "json_object")


def add_constraint_args(p: argparse.ArgumentParser, what: str = "generated text") -> None:
    group = p.add_mutually_exclusive_group()
    group.add_argument("--regex", metavar="R", default=None,
                       help=f"the {what} must match this regular expression entirely")
    group.add_argument("--json-schema", metavar="FILE", default=None,
                       help=f"the {what} must be JSON valid against the JSON Schema in FILE")
    group.add_argument("--choice", nargs="+", metavar="TEXT", default=None,
                       help=f"the {what} must be exactly one of these")


def constraint_from_args(args: argparse.Namespace):
    """The :class:`~unmask.constraints.ConstraintSpec` of ``args`` (None without one); a
    refusal names the flag (``--regex: ...``)."""
    from unmask import constraints

    try:
        if getattr(args, "regex", None) is not None:
            return constraints.regex(args.regex)
        if getattr(args, "choice", None) is not None:
            return constraints.choice(list(args.choice))
        if getattr(args, "json_schema", None) is not None:
            return constraints.json_schema(_read_schema(args.json_schema))
    except UnmaskError as exc:
        raise flag_error(exc) from None
    return None


def flag_error(exc: UnmaskError) -> UnmaskError:
    """``exc`` with the constraint's name replaced by its flag."""
    text = str(exc)
    for name in NAMES:
        if text.startswith(f"{name}: "):
            return UnmaskError(f"--{name.replace('_', '-')}: {text[len(name) + 2:]}")
    return exc


def _read_schema(path: str):
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise UnmaskError(f"json_schema: cannot read {path!r}: "
                          f"{getattr(exc, 'strerror', None) or exc}") from None
    try:
        return parse_json(text)
    except json.JSONDecodeError as exc:
        raise UnmaskError(f"json_schema: {path!r} is not JSON: {exc}") from None
