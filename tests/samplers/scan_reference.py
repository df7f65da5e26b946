"""The greedy scans as they ran on the CPU before they were compiled
(:mod:`unmask.samplers.scan_kernels`), kept as references for the tests: tensor steps, one
per position taken, each reading back whether any row took one ('max' first takes each row's
common prefix in masked maxima, where ``prefix``; MI-guided's budget,
:func:`budget_jump_reference`); and DAPD's dependence as it was summed then (heads in one
reduction)."""

from __future__ import annotations

import torch


def taken_scan_reference(scores, eligible, charges, limit, aggregate="max", available=None,
                         prefix=True):
    """(B, N) bool: ``greedy_scan``'s set, as its CPU path computed it."""
    order = torch.argsort(scores.double().masked_fill(~eligible, -torch.inf), dim=1,
                          descending=True, stable=True)
    ok = eligible if available is None else available & eligible
    ok = ok.gather(1, order)
    ok[:, :1] = eligible.gather(1, order[:, :1])
    if charges.dtype == torch.bool:
        charges = charges.view(torch.uint8)
    taken = _taken_scan(charges, order, ok, limit, aggregate, prefix)
    return torch.zeros_like(eligible).scatter_(1, order, taken) & eligible


def dapd_dependence_reference(att: tuple[torch.Tensor, ...]) -> torch.Tensor:
    """(B, N, N) N * (A + A^T) / 2 of the attention layers ``att`` (B, H, N, N), heads
    summed in one reduction."""
    total = None
    for w in att:
        part = w.sum(1, dtype=torch.promote_types(w.dtype, torch.float32))
        total = part if total is None else total.add_(part)
    n, averaged = total.shape[-1], len(att) * att[0].shape[1]
    return (total + total.transpose(1, 2)).mul_(n / (2 * averaged))


def _taken_scan(charges: torch.Tensor, order: torch.Tensor, ok: torch.Tensor, limit: float,
                aggregate: str, prefix: bool) -> torch.Tensor:
    """:func:`taken_scan_reference`'s set in scan ``order``, ``ok`` (B, N) the positions it may take
    (in scan order), one step per position taken: each step takes, in every row, the first
    position after the row's last taken one whose load fits (those between fit no better
    later: their loads count only positions taken before them, all already taken), adds its
    charge row to the loads, and reads back whether any row took one (on the CPU, where the
    read stalls nothing). Loads add up in scan order, as the rank scan's do."""
    b, n = order.shape
    dtype = torch.float64 if charges.is_floating_point() else charges.dtype
    rank = torch.arange(n, device=order.device)
    if aggregate == "max":  # every position at once where all fit, else the common prefix
        last, load = _max_prefix(charges, order, ok, limit, dtype, prefix)
        if load is None:
            return ok.clone()
        taken = [torch.where(ok & (rank < last), rank, n)]
    else:
        load = torch.zeros(b, n, dtype=dtype, device=order.device)  # in scan order
        last = torch.full((b, 1), -1, device=order.device)  # each row's last taken (n: done)
        taken = []
    while True:
        fits = ok & (rank > last) & (load <= limit)
        first = fits.view(torch.uint8).argmax(1, keepdim=True)  # (B, 1): the first that fits
        took = fits.gather(1, first)  # (B, 1): whether the row takes one
        if not took.any():
            break
        last = torch.where(took, first, n)
        taken.append(last)
        # rows done take any position, unread
        row = charge_row(charges, order, order.gather(1, first)).to(dtype)
        if aggregate == "max":
            torch.maximum(load, row, out=load)
        else:
            load += row
    out = torch.zeros(b, n + 1, dtype=torch.bool, device=order.device)  # column n: not taken
    return out.scatter_(1, torch.cat(taken, 1), True)[:, :n] if taken else out[:, :n]


def _max_prefix(charges: torch.Tensor, order: torch.Tensor, ok: torch.Tensor, limit: float,
                dtype: torch.dtype, prefix: bool) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The 'max' scan up to each row's first miss: while every position the scan may take is
    taken, position j's load is the largest charge to it from those before it (a masked
    maximum over the (B, N, N) charges), so the scan takes all of them up to the first whose
    load does not fit, f. Returns (f (B, 1), N where every one fits; the loads (B, N) in scan
    order of the positions it may take before f, a second masked maximum), or (N, None)
    where every row's positions all fit (one host read: the CPU's path); above
    (without ``prefix``) (-1, zeros): nothing taken yet."""
    b, n = order.shape
    rank = torch.empty_like(order).scatter_(
        1, order, torch.arange(n, device=order.device).expand(b, n))  # each position's
    may = torch.zeros_like(ok).scatter_(1, order, ok)  # (B, N) by position

    def loads(before: torch.Tensor) -> torch.Tensor:  # (B, N, N) bool -> (B, N) in scan order
        pays = torch.where(before & may[:, :, None], charges, 0).amax(1)
        return pays.gather(1, order).to(dtype)

    if not prefix:
        return (torch.full((b, 1), -1, device=order.device),
                torch.zeros(b, n, dtype=dtype, device=order.device))
    miss = ok & ~(loads(rank[:, :, None] < rank[:, None, :]) <= limit)
    missed = miss.any(1, keepdim=True)
    if not missed.any():
        return torch.full((b, 1), n, device=order.device), None
    first = torch.where(missed, miss.view(torch.uint8).argmax(1, keepdim=True), n)
    return first, loads((rank < first)[:, :, None].expand(b, n, n))


def charge_row(charges: torch.Tensor, order: torch.Tensor, at: torch.Tensor) -> torch.Tensor:
    """(B, N) ``charges[b, at[b], :]`` (``charges`` (B, N, N), ``at`` (B, 1) positions), its
    columns in scan ``order`` (B, N); ``charges`` may be a transposed view (its row is then a
    column of the storage: nothing of size B x N x N is copied)."""
    b, n = order.shape
    if charges.stride(-1) != 1 and charges.stride(-2) == 1:
        row = charges.transpose(1, 2).gather(2, at[:, None].expand(b, n, 1)).view(b, n)
    else:
        rows = torch.arange(b, device=order.device)[:, None] * n
        row = charges.reshape(b * n, n).index_select(0, (rows + at).view(-1))
    return row.gather(1, order)


def budget_jump_reference(own: torch.Tensor, mi: torch.Tensor, order: torch.Tensor,
                       valid: torch.Tensor, limit: float, lam: float, free_max: bool
                       ) -> torch.Tensor:
    """``mi_guided._budget_scan_taken``'s set as the CPU took it, one step per position
    taken: each step takes, in every row, the first position after its last taken one that
    fits (those between fit no better later:
    what they would be charged counts only positions taken before them, all already taken),
    with the charges and sums of the scan over every position, and reads back whether any
    row took one."""
    b, n = own.shape
    cost = torch.where(valid, own, torch.inf)
    spent, top = own.new_zeros(b, 1), own.new_zeros(b, 1)
    rank = torch.arange(n, device=own.device)
    last = torch.full((b, 1), -1, device=own.device)  # each row's last taken (n: done)
    pays_of = mi.transpose(1, 2)  # [b, t, s]: what s pays once t is taken
    taken = []
    while True:
        charged = spent + cost
        if free_max:
            top_new = torch.maximum(top, own)
            fits = (charged - top_new) <= limit
        else:
            fits = charged <= limit
        fits &= valid & (rank > last)
        first = fits.view(torch.uint8).argmax(1, keepdim=True)  # (B, 1)
        took = fits.gather(1, first)
        if not took.any():
            break
        last = torch.where(took, first, n)
        taken.append(last)
        if free_max:
            top = torch.where(took, top_new.gather(1, first), top)
        spent = torch.where(took, charged.gather(1, first), spent)
        row = charge_row(pays_of, order, order.gather(1, first)).to(torch.float64)
        cost.addcmul_(took, row, value=lam)
    out = torch.zeros(b, n + 1, dtype=torch.bool, device=own.device)  # column n: not taken
    return out.scatter_(1, torch.cat(taken, 1), True)[:, :n] if taken else out[:, :n]
