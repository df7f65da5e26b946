"""The greedy scans compiled for the CPU (:func:`unmask.samplers.scan.greedy_scan`'s, DAPD's
from the attention, MI-guided's budget): one call a selection, every row's positions visited
in a native loop, so a scan costs what the positions it takes cost, not a tensor operation
(and its launch) per step. The tensor scans of accelerators stay the reference they are
tested against.

Arrays are the tensors' own memory (``Tensor.numpy()``: no copy, any strides), so a transposed
or batch-expanded view is read in place. Loads add up in float64 in scan order, as the tensor
scans' do, so the sets are the same.
"""

from __future__ import annotations

import numpy as np
import torch
from numba import njit


@njit(cache=True)
def _next(s, e, a, load, limit, i):
    """The position a row's scan takes after i (-1: before the first): the first after i in
    scan order (descending score ``s`` (N,), ties to the lower index) that is eligible
    (``e``), available (``a``; the first eligible one need not be) and whose load fits
    (those between fit no better later: nothing is taken before them meanwhile); -1: none."""
    best = -1
    for j in range(len(s)):
        if not e[j] or (best >= 0 and s[j] <= s[best]):
            continue
        if i < 0 or (a[j] and load[j] <= limit
                     and (s[j] < s[i] or (s[j] == s[i] and j > i))):
            best = j
    return best


@njit(cache=True)
def _charge(load, row, use_max):
    """Add one taken position's charge ``row`` (N,) to the ``load`` (N,) of every position."""
    if use_max:
        for k in range(len(load)):
            c = np.float64(row[k])
            if c > load[k]:
                load[k] = c
    else:
        for k in range(len(load)):
            load[k] += np.float64(row[k])


@njit(cache=True)
def dense_scan(scores, eligible, available, charges, limit, use_max, out):
    """Fill ``out`` (B, N) bool (zeros on entry) with the greedy scan's set; ``charges``
    (B, N, N) any real or bool dtype, [b, i, j] what taking i charges j. Each row costs
    O(N) per position taken."""
    b, n = scores.shape
    load = np.empty(n)
    for r in range(b):
        load[:] = 0.0
        s, e, a = scores[r], eligible[r], available[r]
        i = _next(s, e, a, load, limit, -1)
        while i >= 0:
            out[r, i] = True
            _charge(load, charges[r, i], use_max)
            i = _next(s, e, a, load, limit, i)


@njit(cache=True)
def _head_sums(w, r, i, p_i, p_t):
    """Into ``p_i`` (N,) row i of w[r] (H, N, N) summed over heads, into ``p_t`` (N,) its
    column i, one head at a time."""
    n = len(p_i)
    for j in range(n):
        p_i[j] = w[r, 0, i, j]
        p_t[j] = w[r, 0, j, i]
    for h in range(1, w.shape[1]):
        for j in range(n):
            p_i[j] += w[r, h, i, j]
            p_t[j] += w[r, h, j, i]


@njit(cache=True)
def _edges(atts, r, i, scale, tau, t_i, t_t, p_i, p_t, row):
    """DAPD's edges of position i in row r into ``row`` (N,): scale * (T_ij + T_ji) > tau, T
    the attention ``atts`` (layers of (B, H, N, N)) summed over heads, then layers, one term
    at a time in that order (as ``DAPDSampler.dependence``); the others are buffers (N,)."""
    _head_sums(atts[0], r, i, t_i, t_t)
    for layer in range(1, len(atts)):
        _head_sums(atts[layer], r, i, p_i, p_t)
        for j in range(len(row)):
            t_i[j] += p_i[j]
            t_t[j] += p_t[j]
    for j in range(len(row)):
        row[j] = 1.0 if (t_i[j] + t_t[j]) * scale > tau else 0.0


@njit(cache=True)
def attention_scan(scores, eligible, available, atts, scale, tau, out):
    """Fill ``out`` (B, N) bool (zeros on entry) with DAPD's greedy independent set, the
    edges of each position taken computed from the attention ``atts`` then (nothing of size
    B x N x N is formed)."""
    b, n = scores.shape
    load = np.empty(n)
    row = np.empty(n)
    t_i, t_t = np.empty(n, atts[0].dtype), np.empty(n, atts[0].dtype)
    p_i, p_t = np.empty(n, atts[0].dtype), np.empty(n, atts[0].dtype)
    for r in range(b):
        load[:] = 0.0
        s, e, a = scores[r], eligible[r], available[r]
        i = _next(s, e, a, load, 0.0, -1)
        while i >= 0:
            out[r, i] = True
            _edges(atts, r, i, scale, tau, t_i, t_t, p_i, p_t, row)
            _charge(load, row, True)
            i = _next(s, e, a, load, 0.0, i)


@njit(cache=True)
def _budget_next(s, e, own, cost, spent, top, limit, free_max, i):
    """The position MI-guided's scan takes after i (-1: none yet): the first after i in scan
    order (descending score ``s``, ties to the lower index) among the eligible (``e``) whose
    charge ``spent + cost`` fits ``limit`` (less the largest own cost ``own``, with
    ``free_max``); -1: none."""
    best = -1
    for j in range(len(s)):
        if not e[j] or (best >= 0 and s[j] <= s[best]):
            continue
        if i >= 0 and not (s[j] < s[i] or (s[j] == s[i] and j > i)):
            continue
        charged = spent + cost[j]
        if (charged - max(top, own[j]) if free_max else charged) <= limit:
            best = j
    return best


@njit(cache=True)
def budget_scan(entropy, mi, scores, eligible, limit, lam, free_head, free_max, out):
    """Fill ``out`` (B, N) bool (zeros on entry) with MI-guided's rule passing over the
    positions that do not fit (``mi_guided.mi_budget_select``'s set): each row's eligible
    positions in descending ``scores``, position j charged its entropy (float64; none for the
    row's first with ``free_head``) plus ``lam`` x what it pays the positions taken,
    ``mi[b, j, i]`` each, taken while the sum fits ``limit`` (less the largest own cost, with
    ``free_max``); a row taking none takes its first. Sums in float64 in the order of the
    tensor scan."""
    b, n = scores.shape
    own = np.empty(n)
    cost = np.empty(n)
    for r in range(b):
        s, e = scores[r], eligible[r]
        head = _next(s, e, e, cost, 0.0, -1)
        if head < 0:
            continue
        for j in range(n):
            own[j] = np.float64(entropy[r, j]) if e[j] else 0.0
            cost[j] = own[j] if e[j] else np.inf
        if free_head:
            own[head] = cost[head] = 0.0
        spent, top, took = 0.0, 0.0, False
        i = _budget_next(s, e, own, cost, spent, top, limit, free_max, -1)
        while i >= 0:
            out[r, i] = took = True
            if free_max:
                top = max(top, own[i])
            spent = spent + cost[i]
            for j in range(n):
                cost[j] += lam * np.float64(mi[r, j, i])
            i = _budget_next(s, e, own, cost, spent, top, limit, free_max, i)
        if not took:
            out[r, head] = True


def _host(t: torch.Tensor) -> np.ndarray:
    """``t``'s memory as an array (no copy; bool as uint8 for the scan's loads)."""
    t = t.detach()
    return (t.view(torch.uint8) if t.dtype == torch.bool and t.dim() == 3 else t).numpy()


def run_dense(scores: torch.Tensor, eligible: torch.Tensor, available: torch.Tensor,
              charges: torch.Tensor, limit: float, aggregate: str) -> torch.Tensor:
    """(B, N) bool: :func:`dense_scan` on CPU tensors (``available`` as ``eligible`` where
    all are)."""
    out = np.zeros(tuple(eligible.shape), dtype=np.bool_)
    dense_scan(_host(scores), _host(eligible), _host(available), _host(charges),
               float(limit), aggregate == "max", out)
    return torch.from_numpy(out)


def run_attention(scores: torch.Tensor, eligible: torch.Tensor, available: torch.Tensor,
                  atts: tuple[torch.Tensor, ...], scale: float, tau: float) -> torch.Tensor:
    """(B, N) bool: :func:`attention_scan` on CPU tensors, the attention layers of one float
    dtype (float32 or float64: ``scale`` and ``tau`` are taken in it, as a tensor operation
    takes a Python number)."""
    layers = tuple(_host(w) for w in atts)
    number = layers[0].dtype.type
    out = np.zeros(tuple(eligible.shape), dtype=np.bool_)
    attention_scan(_host(scores), _host(eligible), _host(available), layers, number(scale),
                   number(tau), out)
    return torch.from_numpy(out)


def run_budget(entropy: torch.Tensor, mi: torch.Tensor, scores: torch.Tensor,
               eligible: torch.Tensor, limit: float, lam: float, free_head: bool,
               free_max: bool) -> torch.Tensor:
    """(B, N) bool: :func:`budget_scan` on CPU tensors."""
    out = np.zeros(tuple(eligible.shape), dtype=np.bool_)
    budget_scan(_host(entropy), _host(mi), _host(scores), _host(eligible), float(limit),
                float(lam), bool(free_head), bool(free_max), out)
    return torch.from_numpy(out)
