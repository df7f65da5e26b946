"""The paths a command reads and writes, checked before any work: input folders and files,
output folders (created or filled, claimed with :func:`unmask.folders.claim_folder`), output
files that must differ."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from unmask.errors import UnmaskError
from unmask.folders import (  # noqa: F401  (the folder guard, for the commands)
    MODEL_FILE_PATTERNS,
    RUN_MARKER,
    TRAINING_RUN_FILES,
    claim_folder,
    claim_problem,
    folder_problem,
    foreign_models,
    holds_nothing,
    mark_folder,
    model_files,
    run_marker,
)


def existing_dir(path: str | Path, what: str) -> Path:
    path = Path(path)
    if not path.is_dir():
        raise UnmaskError(f"{what}: {path} is not a directory")
    return path


def read_file_arg(path: str) -> str:
    """The text of ``--file PATH`` (``-``: standard input; UTF-8, a BOM dropped)."""
    try:
        return sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as e:
        raise UnmaskError(f"--file: cannot read {path} ({e.__class__.__name__})") from None


def read_items(path: str, key: str, *, plain_lines: bool) -> list[str]:
    """The strings of ``--file PATH``, one a non-blank line: a JSON string, or an object with a
    string ``key``; with ``plain_lines`` a line that does not start like JSON (``"`` or
    ``{``) is the string itself, else every line must be JSON. Refused in one line naming the
    line; a file with none is refused too."""
    from unmask.io import parse_json  # too deep a nesting is refused in one line too

    items = []
    for n, line in enumerate(read_file_arg(path).splitlines(), 1):
        line = line.strip() if plain_lines else line
        if not line.strip():
            continue
        if not plain_lines or line.startswith(('"', "{")):
            try:
                item = parse_json(line)
            except json.JSONDecodeError:
                raise UnmaskError(f"--file: line {n} " + ("starts like JSON but is not"
                                  if plain_lines else "is not JSON")) from None
            line = item.get(key) if isinstance(item, dict) else item
            if not isinstance(line, str):
                raise UnmaskError(f"--file: line {n}: expected a string or an object with a "
                                  f"string {key!r}")
        items.append(line)
    if not items:
        raise UnmaskError(f"--file: {path} holds no {key}")
    return items


def output_folder(path: str | Path, what: str) -> Path:
    """``path`` checked as a folder the command will create or fill (before any work,
    :func:`folder_problem`); :class:`UnmaskError` ``"{what}: ..."`` otherwise."""
    problem = folder_problem(path)
    if problem:
        raise UnmaskError(f"{what}: {problem}")
    return Path(path)


def folder_to_keep(text: str) -> str:
    """An argparse type: a folder that exists or can be made (:func:`folder_problem`);
    nothing is created here."""
    problem = folder_problem(text)
    if problem:
        raise argparse.ArgumentTypeError(problem)
    return text


#: the command name a bench cache folder is claimed by; the shard files it held before it
#: was marked (64 hex digits .safetensors)
CACHE_COMMAND, CACHE_FILES = "bench cache", ("?" * 64 + ".safetensors",)


def cache_folder(text: str) -> str:
    """An argparse type: a folder a bench sweep may keep its shards in: new, empty or a
    cache already (:func:`claim_problem`); nothing is created here."""
    problem = claim_problem(text, CACHE_COMMAND, own_files=CACHE_FILES)
    if problem:
        raise argparse.ArgumentTypeError(problem)
    return text


def command_name(args: argparse.Namespace) -> str:
    """The words that name the command ``args`` were parsed for ("sudoku train")."""
    words = [getattr(args, "command", None)]
    words += [getattr(args, f"cmd_{n}", None) for n in range(2, 5)]
    return " ".join(w for w in words if w) or "unmask"


def distinct_outputs(**paths: Path | None) -> None:
    """Refuse two output flags naming the same file (one would overwrite the other);
    keys are flag names with ``_`` for ``-`` (``json``, ``plot``)."""
    seen: dict[str, str] = {}
    for flag, path in paths.items():
        if path is None:
            continue
        key = os.path.normcase(os.path.abspath(path))
        if key in seen:
            raise UnmaskError(f"--{flag.replace('_', '-')}: same file as --{seen[key]} "
                              f"({path}); give two different paths")
        seen[key] = flag.replace("_", "-")
