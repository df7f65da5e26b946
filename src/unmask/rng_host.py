""":func:`unmask.rng.row_uniform` compiled for the CPU: one native loop over the draw instead
of a hundred small tensor operations, the same integer arithmetic (unsigned 64-bit, reduced
mod 2**32 where the tensor code reduces), so the same bits."""

from __future__ import annotations

import numpy as np
import torch
from numba import njit

_M32 = np.uint64(0xFFFFFFFF)


@njit(cache=True)
def _mix32(x):
    """lowbias32 of a uint64 (as :func:`unmask.rng.mix32`: products taken mod 2**32)."""
    x = ((x ^ (x >> np.uint64(16))) * np.uint64(0x7FEB352D)) & _M32
    x = ((x ^ (x >> np.uint64(15))) * np.uint64(0x846CA68B)) & _M32
    return x ^ (x >> np.uint64(16))


@njit(cache=True)
def row_key(seed, step, stream):
    """The key of one row's draw at ``step`` for ``stream`` (ints)."""
    stream_key = _mix32((np.uint64(stream) & _M32) + np.uint64(0x85EBCA77))
    high = _mix32(np.uint64((seed >> 32) & 0xFFFFFFFF))
    step_key = _mix32(np.uint64(step & 0xFFFFFFFF) + np.uint64(0x632BE5AB))
    key = _mix32(np.uint64(seed & 0xFFFFFFFF) ^ high)
    key = _mix32((key + step_key) & _M32)
    return _mix32((key ^ stream_key) & _M32)


@njit(cache=True)
def uniform_at(key, index):
    """The uniform float64 of element ``index`` of the draw of ``key`` (:func:`row_key`)."""
    h = _mix32((key + _mix32(np.uint64(index))) & _M32)
    h1 = _mix32((h + np.uint64(0x9E3779B9)) & _M32) >> np.uint64(6)
    h2 = _mix32(h ^ np.uint64(0x27D4EB2F)) >> np.uint64(6)
    return (np.float64(h1) * 2.0**26 + np.float64(h2) + 0.5) / 2.0**52


@njit(cache=True)
def _fill(seeds, steps, stream, start, out):
    """``out`` (B, numel) float64: row b's uniforms of elements start .. start + numel - 1."""
    for b in range(out.shape[0]):
        key = row_key(seeds[b], steps[b], stream)
        for e in range(out.shape[1]):
            out[b, e] = uniform_at(key, start + e)


def row_uniform_host(seeds: torch.Tensor, step: torch.Tensor, stream: int, numel: int,
                     start: int = 0) -> torch.Tensor:
    """(B, numel) float64 on the CPU: :func:`unmask.rng.row_uniform`'s values."""
    out = np.empty((seeds.shape[0], numel))
    _fill(seeds.detach().numpy(), step.detach().numpy(), int(stream), int(start), out)
    return torch.from_numpy(out)
