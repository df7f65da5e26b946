"""Pieces shared by CLI subcommands: sampler options, model loading, progress bars."""

from __future__ import annotations

import argparse
import contextlib
from pathlib import Path

from unmask.errors import UnmaskError
from unmask.samplers.base import make_sampler, parse_param_value


def add_sampler_args(p: argparse.ArgumentParser, default: str = "confidence") -> None:
    p.add_argument("--sampler", default=default, help=f"sampler name (default {default})")
    p.add_argument("--param", action="append", default=[], metavar="K=V",
                   help="sampler parameter, repeatable (e.g. --param k=3)")


def parse_params(items: list[str]) -> dict:
    params = {}
    for item in items:
        if "=" not in item:
            raise UnmaskError(f"--param: expected K=V, got {item!r}")
        k, v = item.split("=", 1)
        params[k.strip()] = parse_param_value(v.strip())
    return params


def sampler_from_args(args: argparse.Namespace):
    return make_sampler(args.sampler, **parse_params(args.param))


def existing_dir(path: str | Path, what: str) -> Path:
    path = Path(path)
    if not path.is_dir():
        raise UnmaskError(f"{what}: {path} is not a directory")
    return path


def output_path(path: str | Path, what: str) -> Path:
    path = Path(path)
    if not path.parent.is_dir():
        raise UnmaskError(f"{what}: folder {path.parent} does not exist")
    return path


@contextlib.contextmanager
def progress_bar(total: int, description: str, enabled: bool = True):
    """Yield update(completed) for a rich progress bar on stderr (no-op when disabled)."""
    if not enabled:
        yield lambda completed: None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    with Progress("[progress.description]{task.description}", BarColumn(),
                  MofNCompleteColumn(), TimeElapsedColumn(),
                  console=Console(stderr=True), transient=True) as prog:
        task = prog.add_task(description, total=total)
        yield lambda completed: prog.update(task, completed=completed)
