"""Counting host reads: the calls that copy a tensor's value to Python.

On a GPU each of them waits for the device to finish its queued work (a synchronisation), so
the decode loop's cost per pass grows with their number whatever the batch. The decode loop
makes one per pass to stop (and a few for its contract checks); samplers, the verifier and
hooks are written to add none. :func:`count_host_reads` counts them on any device (on the
CPU they cost nothing, but the count is the same), which is how the tests hold every sampler
to the loop's own count. Where the host reads a tensor's memory in place
(:data:`HOST_LOOP_DEVICES`, the CPU) the greedy scans and the row noise run as compiled loops
over it instead; :func:`as_on_accelerators` runs the accelerators' path there.

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


#: device types whose tensors the host reads in place, so a read there stalls no queue: on
#: them the greedy scans, the row noise, ReMDM's pass and the end-at-EOS check run as
#: compiled loops on the host (:mod:`unmask.samplers.scan_kernels`, :mod:`unmask.rng_host`,
#: :mod:`unmask.loop_kernels`); elsewhere as tensor operations that read nothing back
HOST_LOOP_DEVICES = frozenset({"cpu"})


def runs_on_host(device: torch.device) -> bool:
    """Whether work on ``device`` runs as a compiled host loop (:data:`HOST_LOOP_DEVICES`)."""
    return device.type in HOST_LOOP_DEVICES


@contextlib.contextmanager
def as_on_accelerators():
    """Inside the block nothing runs as a host loop, on any device: the scans and the row
    noise run as on an accelerator (for counting its host reads, and testing that path, on
    the CPU)."""
    global HOST_LOOP_DEVICES
    saved, HOST_LOOP_DEVICES = HOST_LOOP_DEVICES, frozenset()
    try:
        yield
    finally:
        HOST_LOOP_DEVICES = saved


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
