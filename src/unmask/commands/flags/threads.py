"""``--threads``: its type and flag, and how the CLI gives torch and numba their threads."""

from __future__ import annotations

import argparse
import os

from unmask.commands.flags.types import positive_int
from unmask.errors import UnmaskError


def threads_int(text: str) -> int:
    """An argparse type: a thread count, from 1 to the CPUs of this machine."""
    value = positive_int(text)
    cpus = os.cpu_count() or 1
    if value > cpus:
        raise argparse.ArgumentTypeError(f"must be <= {cpus} (the CPUs of this machine), "
                                         f"got {value}")
    return value


def add_threads_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--threads", type=threads_int, default=None, metavar="N",
                   help="CPU threads of torch and numba (default: torch's default, which "
                        "follows OMP_NUM_THREADS)")


def apply_threads(threads: int | None) -> int:
    """Give torch and numba ``threads`` CPU threads (None: torch's current count, for both);
    returns the count. numba's OpenMP pool sets the process's OpenMP thread count when it
    starts, which is torch's too: it is started here, before any work, and torch's count set
    after it."""
    import numba
    import torch

    n = threads if threads is not None else torch.get_num_threads()
    if threads is not None and threads < 1:
        raise UnmaskError(f"--threads: must be >= 1, got {threads}")
    numba.set_num_threads(min(n, numba.config.NUMBA_NUM_THREADS))  # starts numba's pool
    torch.set_num_threads(n)
    return n


def thread_counts(counts: tuple[int, int | None] | None = None) -> tuple[int, int | None]:
    """(torch's, numba's) thread counts (numba's None while its pool has not started); with
    ``counts``, set them back to those first."""
    import numba
    import torch

    if counts is not None:
        if counts[1] is not None:
            numba.set_num_threads(counts[1])
        torch.set_num_threads(counts[0])
    started = getattr(numba.np.ufunc.parallel, "_is_initialized", True)
    return torch.get_num_threads(), (numba.get_num_threads() if started else None)
