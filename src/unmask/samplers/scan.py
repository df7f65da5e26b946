"""The greedy scans of the budgeted samplers (EB, MI-guided, DAPD, DEMASK): positions in a
score order, each taken while what it is charged stays within a budget."""

from __future__ import annotations

import torch

from unmask.errors import require
from unmask.host_reads import runs_on_host
from unmask.samplers.base import StepState, orderable

SCAN_ORDERS = ("entropy", "confidence")


def check_scan_order(order: str) -> None:
    """Raise :class:`UnmaskError` unless ``order`` is one of :data:`SCAN_ORDERS` (for a
    sampler's ``__post_init__``, so a bad order fails at construction)."""
    require(order in SCAN_ORDERS,
            f"order: expected {' or '.join(map(repr, SCAN_ORDERS))}, got {order!r}")


def scan_order_scores(state: StepState, order: str) -> torch.Tensor:
    """(B, N) scores whose descending order is the scan order of budgeted samplers.

    'entropy': ascending entropy; 'confidence': descending proposal probability.
    """
    check_scan_order(order)
    return -state.entropy if order == "entropy" else state.x0_prob


def scan_length(may: torch.Tensor) -> int:
    """How many steps a scan needs: 1 + the last scan index (over the batch) where ``may``
    (B, N) bool, in scan order, is True; 0 where it is nowhere. One host read."""
    b, n = may.shape
    return int((may * torch.arange(1, n + 1, device=may.device)).amax()) if b * n else 0


def scan_rows(charges: torch.Tensor, order: torch.Tensor, steps: int) -> torch.Tensor:
    """(T, B, N) the rows of ``charges`` (B, N, N) for the first T = ``steps`` positions of
    scan ``order`` (B, N), their columns in scan order too: [t, b, s] =
    charges[b, t-th scanned, s-th scanned]. Two gathers of T x B x N entries, each along the
    dimension the storage keeps contiguous (``charges`` may be a transposed view: nothing of
    size B x N x N is copied)."""
    b, n = order.shape
    flat = order + torch.arange(b, device=order.device)[:, None] * n  # (B, N) rows of (B*N, .)
    if charges.stride(-1) != 1 and charges.stride(-2) == 1:  # a transposed view: M = charges^T
        m = charges.transpose(1, 2)
        cols = m.gather(2, order[:, None, :steps].expand(b, n, steps))  # [b, j, t] = M[b, j, t-th]
        out = cols.reshape(b * n, steps).index_select(0, flat.view(-1)).view(b, n, steps)
        return out.permute(2, 0, 1)  # [t, b, s] = M[b, s-th, t-th]
    rows = charges.reshape(b * n, n).index_select(0, flat[:, :steps].reshape(-1))
    out = rows.view(b, steps, n).gather(2, order[:, None, :].expand(b, steps, n))
    return out.transpose(0, 1)


def greedy_scan(scores: torch.Tensor, eligible: torch.Tensor, charges: torch.Tensor,
                limit: float, aggregate: str = "max", available: torch.Tensor | None = None
                ) -> torch.Tensor:
    """(B, N) bool: visit each row's eligible positions in descending ``scores`` (B, N) (ties
    to the lower index) and take position j when it is ``available`` (B, N) bool (None: all)
    and its load fits: load_j <= ``limit`` (>= 0), where load_j aggregates ('max' or 'sum')
    ``charges[b, i, j]`` (B, N, N, finite) over the positions i taken before j. The first
    eligible position is always taken (progress). Float loads add up in float64 in scan order.

    Sequential (what is taken changes every later load: the lexicographically first maximal
    independent set, for 'max', is P-complete). Where the host reads tensors in place
    (:func:`~unmask.host_reads.runs_on_host`, the CPU) it runs there as a compiled loop over
    rows that jumps from one taken position to the next
    (:func:`unmask.samplers.scan_kernels.dense_scan`); elsewhere it steps through every rank,
    vectorised over rows (:func:`_rank_scan`), and reads nothing."""
    if runs_on_host(scores.device):
        from unmask.samplers.scan_kernels import run_dense

        ok = eligible if available is None else available
        return run_dense(scores, eligible, ok, charges, limit, aggregate)
    order = torch.argsort(orderable(scores).masked_fill(~eligible, -torch.inf), dim=1,
                          descending=True, stable=True)
    ok = eligible if available is None else available & eligible
    ok = ok.gather(1, order)
    ok[:, :1] = eligible.gather(1, order[:, :1])
    if charges.dtype == torch.bool:
        charges = charges.view(torch.uint8)
    taken = _rank_scan(charges, order, ok, limit, aggregate)  # (B, N) in scan order
    return torch.zeros_like(eligible).scatter_(1, order, taken) & eligible


def _rank_scan(charges: torch.Tensor, order: torch.Tensor, ok: torch.Tensor, limit: float,
               aggregate: str) -> torch.Tensor:
    """:func:`greedy_scan`'s set in scan ``order``, ``ok`` (B, N) the positions it may take
    (in scan order): one step per rank, every rank (no host read), the charge rows gathered
    once in scan order (:func:`scan_rows`), each step three element-wise operations on
    (B, N)."""
    b, n = order.shape
    pays = scan_rows(charges, order, n)  # (N, B, N)
    if pays.is_floating_point():  # summed in float64, each step's (B, N) in one block
        pays = pays.to(torch.float64, memory_format=torch.contiguous_format)
    load = pays.new_zeros(b, n)  # in scan order
    taken = pays.new_zeros(n, b)
    ok, fits = ok.T.to(pays.dtype), load.new_empty(b, dtype=torch.bool)
    for t in range(n):
        torch.le(load[:, t], limit, out=fits)
        torch.mul(ok[t], fits, out=taken[t])
        charge = pays[t] * taken[t][:, None]  # (B, N)
        if aggregate == "max":
            torch.maximum(load, charge, out=load)
        else:
            load += charge
    return taken.T.bool()
