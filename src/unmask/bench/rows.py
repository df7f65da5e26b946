"""The shared columns of bench rows: rates (tokens per pass, sequences per token, seconds
per solved item), AUP, the NFE against sequential decoding, and paired counts against a
reference row."""

from __future__ import annotations

import math

from unmask.bench.contract import BenchRow


def add_rate_metrics(rows: list[BenchRow], *, per_solved: bool = True) -> None:
    """Set the rate fields of every row that has their inputs: ``tokens_per_pass`` (the
    row's ``revealed`` column, mean tokens decoded per item, over ``nfe``),
    ``sequences_per_token`` (``sequences`` over ``revealed``) and ``wall_per_solved``
    (``wall_s`` over ``accuracy * n_items``; None when nothing was solved).

    Args:
        per_solved: the accuracy is a share of items solved (False, e.g. a closeness to a
            reference distribution: ``wall_per_solved`` stays None).
    """
    for r in rows:
        revealed = r.columns.get("revealed")
        r.tokens_per_pass = revealed / r.nfe if revealed is not None and r.nfe else None
        r.sequences_per_token = (r.sequences / revealed
                                 if r.sequences is not None and revealed else None)
        n_solved = (r.accuracy * r.n_items if per_solved and r.accuracy is not None
                    and r.n_items is not None else None)
        r.wall_per_solved = r.wall_s / n_solved if n_solved and r.wall_s is not None else None


def aup(rows: list[BenchRow], *, alpha: float = 3.0,
        y_min_offset: float = 5.0) -> float | None:
    """Accuracy Under Parallelism (d3LLM, arXiv 2601.07568) over a bench's rows.

    With the rows' points (rho_i = ``tokens_per_pass``, y_i = 100 * ``accuracy``, in %)
    sorted by rho, y_1 the accuracy at the smallest rho, and only the points with
    y_i >= y_1 - ``y_min_offset`` kept:

        AUP = rho_1 y_1 + sum_{i >= 2} (rho_i - rho_{i-1}) (y_i W(y_i) + y_{i-1} W(y_{i-1})) / 2,
        W(y) = min(exp(-alpha (1 - y / y_max)), 1), y_max = the largest accuracy of all rows.

    A weighted area under the accuracy vs parallelism curve: parallelism bought with accuracy
    counts less the more accuracy it cost. Rows without either (a reference row that decodes
    nothing) are skipped; None when none is left.
    """
    pts = sorted((r.tokens_per_pass, 100.0 * r.accuracy) for r in rows
                 if r.tokens_per_pass is not None and r.accuracy is not None
                 and r.tokens_per_pass > 0)
    if not pts:
        return None
    y_max = max(p[1] for p in pts)
    y_1 = pts[0][1]
    pts = [p for p in pts if p[1] >= y_1 - y_min_offset]

    def w(acc: float) -> float:
        return min(math.exp(-alpha * (1.0 - acc / y_max)), 1.0) if y_max > 0 else 0.0

    total = pts[0][0] * pts[0][1]
    for (r0, a0), (r1, a1) in zip(pts[:-1], pts[1:], strict=True):
        total += (r1 - r0) * (a1 * w(a1) + a0 * w(a0)) / 2.0
    return total


#: one-position-per-step samplers, in the order preferred as the NFE reference
SEQUENTIAL_LABELS = ("confidence", "entropy", "margin", "uniform")


def add_nfe_vs_sequential(rows: list[BenchRow]) -> BenchRow | None:
    """Set the column ``nfe_vs_sequential`` on every row: its ``nfe`` over that of the first
    sequential sampler run with default settings (confidence, else entropy, margin, uniform),
    or None when none was run or the row has no NFE. Returns the reference row."""
    seq = next((r for label in SEQUENTIAL_LABELS for r in rows if r.label == label), None)
    for r in rows:
        r.columns["nfe_vs_sequential"] = (r.nfe / seq.nfe if seq and r.nfe is not None
                                          else None)
    return seq


def paired_counts(each: str, ref_each: str) -> tuple[int, int]:
    """(gained, lost): the items right in ``each`` and wrong in ``ref_each``, and the reverse,
    from per-item strings of '0'/'1' over the same items in the same order. A paired
    (McNemar) comparison rests on them: a difference in solved share is noise unless
    gained - lost is large against sqrt(gained + lost)."""
    if len(each) != len(ref_each):
        raise ValueError(f"solved_each: rows cover {len(each)} and {len(ref_each)} items")
    pairs = list(zip(each, ref_each, strict=True))
    return pairs.count(("1", "0")), pairs.count(("0", "1"))


def add_paired_vs(rows: list[BenchRow], ref: BenchRow | None) -> None:
    """Set the columns ``gained_vs_ref`` / ``lost_vs_ref`` on every row: its
    :func:`paired_counts` against ``ref`` over their ``solved_each`` columns; None without a
    reference."""
    for r in rows:
        if ref is None or "solved_each" not in r.columns or "solved_each" not in ref.columns:
            r.columns["gained_vs_ref"] = r.columns["lost_vs_ref"] = None
            continue
        r.columns["gained_vs_ref"], r.columns["lost_vs_ref"] = paired_counts(
            r.columns["solved_each"], ref.columns["solved_each"])
