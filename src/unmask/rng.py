"""Counter-based random numbers keyed by (row seed, step, stream, element).

A row's random stream depends only on its own seed and step, never on which other rows share
its batch, so decoding a batch gives the same result as decoding its rows one by one.
All arithmetic stays in int64 below 2**49, so it is exact on every backend.
"""

from __future__ import annotations

import functools

import torch

from unmask.host_reads import runs_on_host

_M32 = 0xFFFFFFFF


def _mul32(a: int, c: int) -> int:
    """(a * c) mod 2**32 for one Python int a in [0, 2**32)."""
    return (a * c) & _M32


def _mul32_(a: torch.Tensor, c: int) -> torch.Tensor:
    """(a * c) mod 2**32 in place, for int64 a in [0, 2**32): a's low 16 bits times c
    (< 2**48) plus its high 16 bits times c's low 16, shifted (< 2**48); the high halves'
    product is a multiple of 2**32. No int64 overflow."""
    high = (a >> 16).mul_(c & 0xFFFF).bitwise_left_shift_(16)
    return a.bitwise_and_(0xFFFF).mul_(c).add_(high).bitwise_and_(_M32)


def mix32(x: torch.Tensor | int) -> torch.Tensor | int:
    """A 32-bit avalanche hash (lowbias32) of int64 values in [0, 2**32) (a tensor, or one
    Python int: the same operations). A tensor is not changed: the first step makes the
    tensor the rest work on in place."""
    if not isinstance(x, torch.Tensor):
        x = _mul32(x ^ (x >> 16), 0x7FEB352D)
        x = _mul32(x ^ (x >> 15), 0x846CA68B)
        return x ^ (x >> 16)
    x = _mul32_(x ^ (x >> 16), 0x7FEB352D)
    x = _mul32_(x.bitwise_xor_(x >> 15), 0x846CA68B)
    return x.bitwise_xor_(x >> 16)


def row_uniform(seeds: torch.Tensor, step: torch.Tensor, stream: int,
                shape: tuple[int, ...], start: int = 0) -> torch.Tensor:
    """Uniform float64 in (0, 1) of shape (B, *shape), 52 random bits each.

    seeds: (B,) int64 row seeds; step: (B,) int64 per-row step counters; stream: an int that
    separates independent uses within one step; start: the flat index of the first element
    (a slice of a longer draw: ``start = lo * V`` with shape (W, V) gives rows lo:lo+W of the
    (N, V) draw).
    """
    numel = 1
    for s in shape:
        numel *= s
    if runs_on_host(seeds.device):
        from unmask.rng_host import row_uniform_host

        return row_uniform_host(seeds, step, stream, numel, start).view(seeds.shape[0], *shape)
    return row_uniform_tensors(seeds, step, stream, numel, start).view(seeds.shape[0], *shape)


def row_uniform_tensors(seeds: torch.Tensor, step: torch.Tensor, stream: int, numel: int,
                        start: int = 0) -> torch.Tensor:
    """(B, numel) :func:`row_uniform`'s values as tensor operations on ``seeds``' device (the
    path of accelerators; where the host reads tensors in place,
    :func:`~unmask.host_reads.runs_on_host`, :mod:`unmask.rng_host` computes them in one
    compiled loop)."""
    device = seeds.device
    # the seed's high half and the step hashed in one call (B,) -> (2, B)
    high, step_key = mix32(torch.stack(((seeds >> 32) & _M32, (step & _M32) + 0x632BE5AB)))
    key = mix32((seeds & _M32) ^ high)
    key = mix32((key + step_key) & _M32)
    key = mix32((key ^ mix32((stream & _M32) + 0x85EBCA77)) & _M32)
    h = mix32((key[:, None] + _mixed_index(start, numel, device)[None, :]) & _M32)  # (B, numel)
    halves = torch.empty((2, *h.shape), dtype=h.dtype, device=device)
    torch.add(h, 0x9E3779B9, out=halves[0]).bitwise_and_(_M32)
    torch.bitwise_xor(h, 0x27D4EB2F, out=halves[1])
    h1, h2 = mix32(halves).bitwise_right_shift_(6)  # two (B, numel) halves of 26 bits each
    return h1.double().mul_(2.0**26).add_(h2.double()).add_(0.5).div_(2.0**52)


@functools.lru_cache(maxsize=32)
def _mixed_index(start: int, numel: int, device: torch.device) -> torch.Tensor:
    """mix32 of the element indices start .. start + numel - 1: the same for every row and
    step, so made once per shape (read only)."""
    return mix32(torch.arange(start, start + numel, device=device, dtype=torch.int64))


def row_gumbel(seeds: torch.Tensor, step: torch.Tensor, stream: int,
               shape: tuple[int, ...], start: int = 0) -> torch.Tensor:
    """Standard Gumbel noise in float64, shape (B, *shape) (``start``: :func:`row_uniform`)."""
    return row_uniform(seeds, step, stream, shape, start).log_().neg_().log_().neg_()
