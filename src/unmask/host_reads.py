"""Counting host reads: the calls that copy a tensor's value to Python.

On a GPU each of them waits for the device to finish its queued work (a synchronisation), so
the decode loop's cost per pass grows with their number whatever the batch. The decode loop
makes one per pass to stop (and a few for its contract checks); samplers, the verifier and
hooks are written to add none. :func:`count_host_reads` counts them on any device (on the
CPU they cost nothing, but the count is the same), which is how the tests hold every sampler
to the loop's own count.

Not counted: operations whose output shape depends on values (``nonzero``, indexing with a
bool mask, ``unique``), which also synchronise on a GPU but are not calls to read a value.
"""

from __future__ import annotations

import contextlib
import functools
import traceback
from collections import Counter
from dataclasses import dataclass, field

import torch

#: the Tensor methods that return a tensor's value to Python
READS = ("item", "tolist", "numpy", "__bool__", "__int__", "__float__", "__index__",
         "__complex__")


@dataclass
class HostReads:
    """Host reads made inside :func:`count_host_reads`.

    total: how many; by_site: how many per calling line (``file:line function``, the first
    frame outside torch), for finding them.
    """

    total: int = 0
    by_site: Counter = field(default_factory=Counter)

    def add(self, site: str) -> None:
        self.total += 1
        self.by_site[site] += 1


def _caller() -> str:
    for frame in reversed(traceback.extract_stack()[:-2]):
        if "/torch/" not in frame.filename:
            return f"{frame.filename.rsplit('/', 1)[-1]}:{frame.lineno} {frame.name}"
    return "?"


@contextlib.contextmanager
def count_host_reads(sites: bool = False):
    """Count the host reads (:data:`READS` of ``torch.Tensor``) made in the block.

    Yields a :class:`HostReads`, filled as the block runs. With ``sites``, also where each
    read was made (slower: a stack walk per read). Not thread-safe: it patches
    ``torch.Tensor`` for the duration of the block.
    """
    reads = HostReads()
    saved = {name: getattr(torch.Tensor, name) for name in READS if hasattr(torch.Tensor, name)}

    def counted(original):
        @functools.wraps(original)
        def read(self, *args, **kwargs):
            reads.add(_caller() if sites else "")
            return original(self, *args, **kwargs)
        return read

    try:
        for name, original in saved.items():
            setattr(torch.Tensor, name, counted(original))
        yield reads
    finally:
        for name, original in saved.items():
            setattr(torch.Tensor, name, original)
