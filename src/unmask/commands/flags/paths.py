"""The paths a command reads and writes, checked before any work: input folders and files,
output folders (created or filled), output files that must differ."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from unmask.errors import UnmaskError


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


def folder_problem(path: str | Path) -> str | None:
    """What keeps ``path`` from being a folder a command creates or fills (None: nothing): it
    must be a folder or not exist yet, and the nearest existing folder above it writable."""
    if str(path) == "":
        return "empty path"
    path = Path(path)
    if path.exists() and not path.is_dir():
        return f"{path} exists and is not a folder"
    above = next(p for p in (path, *path.parents) if p.exists())
    if not above.is_dir():
        return f"{above} is a file, not a folder"
    if not os.access(above, os.W_OK | os.X_OK):
        return f"folder {above} is not writable"
    return None


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
