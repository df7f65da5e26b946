"""A progress bar on stderr (rich), for long loops of the command line and the library."""

from __future__ import annotations

import contextlib


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
