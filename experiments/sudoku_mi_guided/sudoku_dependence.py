"""Where parallel decoding loses on Sudoku: dependence between cells, or single cells?

One run, one model, the same puzzles, every row against EB-Sampler (confidence order) at the
same number of passes:
- EB gamma sweep (the baseline frontier),
- MI-guided with the shipped estimator (gamma x lambda),
- MI-guided with ground-truth MI by probing (``mi-oracle``; slow, ``--oracle``),
- EB with an MI veto: EB's prefix, minus every position whose summed MI with the positions
  already taken this pass exceeds delta (defined here, not a shipped sampler),
- MI-guided with deferral: each position's cost also carries mu times its summed estimated MI
  with every position still masked, so a cell that the rest of the board could still resolve
  waits (defined here, not a shipped sampler),
- MI-guided with a rider cap: positions with entropy above ``cap`` never fit the budget, so an
  uncertain cell is only revealed as the first of its pass (``mi-cap``, defined here).
Columns: solved %, decoding passes, cumulative entropy, the share of boards where one pass
revealed two same-digit peers (a clash: the failure that dependence-aware decoding targets),
and the solved % of the EB frontier interpolated at the row's passes, with the difference.

    PYTHONPATH=src .venv/bin/python experiments/sudoku_mi_guided/sudoku_dependence.py \\
        --limit 200 [--oracle]
        [--set hard|medium|FILE] [--specs SPEC ...]   (replaces the default rows; keep two or
        more EB rows)
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

import numpy as np
import torch
from rich.console import Console
from rich.table import Table

from unmask.models.auto import load_model
from unmask.samplers.base import Selection
from unmask.samplers.eb import EBSampler
from unmask.samplers.mi_guided import MIGuidedSampler
from unmask.samplers.scan import scan_order_scores
from unmask.samplers.spec import SamplerSpec
from unmask.samplers.verified import Verified
from unmask.sudoku.bench import run_bench as bench_sudoku
from unmask.sudoku.datasets import set_puzzles


@dataclass
class EBWithMIVeto(MIGuidedSampler):
    """EB's prefix (confidence order), scanned in that order; a position waits when its summed
    estimated MI with the positions taken before it exceeds ``delta`` (the first is always
    taken)."""

    delta: float = 0.02

    def select(self, state):
        mi = self.mutual_information(state).double()
        prefix = EBSampler(gamma=self.gamma, order="confidence").select(state).reveal
        scores = scan_order_scores(state, "confidence").double().masked_fill(~prefix, -torch.inf)
        order = torch.argsort(scores, dim=1, descending=True, stable=True)
        b, n = prefix.shape
        rows = torch.arange(b, device=prefix.device)
        taken = torch.zeros(b, n, dtype=torch.float64, device=prefix.device)
        for t in range(int(prefix.sum(1).max())):  # vectorised over rows
            i = order[:, t]
            load = (mi[rows, i] * taken).sum(1)
            take = prefix[rows, i] & ((load <= self.delta) | (taken.sum(1) == 0))
            taken[rows, i] = torch.where(take, 1.0, taken[rows, i])
        return Selection(taken.bool())


@dataclass
class MIGuidedWithDeferral(MIGuidedSampler):
    """MI-guided, with position i's entropy raised by mu * sum_j I[i, j] over the positions j
    still masked: a first-order measure of how much of H_i waiting could still resolve."""

    mu: float = 0.05

    def position_cost(self, state, mi):
        resolvable = (mi.double() * state.masked[:, None, :].double()).sum(-1)
        return state.entropy.double() + self.mu * resolvable


@dataclass
class MIGuidedWithRiderCap(MIGuidedSampler):
    """MI-guided, where no position with entropy above ``cap`` fits the budget: the pass's
    first position is still taken whatever its entropy (the rule's at-least-one), but
    uncertain positions never ride beside it."""

    cap: float = 0.1

    def position_cost(self, state, mi):
        return state.entropy.double().masked_fill(state.entropy > self.cap, torch.inf)


#: the rules defined here, by spec name; they stay out of the library's sampler registry
LOCAL_SAMPLERS = {"eb-mi-veto": EBWithMIVeto, "mi-defer": MIGuidedWithDeferral,
                  "mi-cap": MIGuidedWithRiderCap}
for _name, _cls in LOCAL_SAMPLERS.items():
    _cls.name = _name


class LocalEntry(SamplerSpec):
    """A bench entry that builds the rules above by name, and registered samplers otherwise."""

    def build(self):
        cls = LOCAL_SAMPLERS.get(self.name)
        if cls is None:
            return super().build()
        sampler = cls(**self.params)
        return sampler if self.verify is None else Verified(sampler, tolerance=self.verify)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--set", default="hard", help="hard | medium | a puzzle file (default hard)")
    ap.add_argument("--limit", type=int, default=200, help="first N puzzles of the set")
    ap.add_argument("--oracle", action="store_true", help="add mi-oracle rows (slow)")
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--specs", nargs="+", default=None, metavar="SPEC",
                    help="sampler specs replacing the default rows (keep >= 2 EB rows)")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    specs = [f"eb:gamma={g},order=confidence" for g in (0.03, 0.1, 0.2, 0.3, 0.5, 1.0)]
    specs += [f"mi-guided:gamma={g},lam={lam},order=confidence"
              for g in (0.3, 0.6, 1.0) for lam in (1, 10)]
    specs += [f"eb-mi-veto:gamma={g},delta={d}" for g in (0.3, 1.0) for d in (0.02, 0.1)]
    specs += [f"mi-defer:gamma={g},mu={mu},order=confidence"
              for g, mu in ((0.6, 0.05), (1.0, 0.05), (1.0, 0.1))]
    if args.oracle:
        specs += [f"mi-oracle:gamma={g},order=confidence" for g in (0.3, 0.6, 1.0)]
    if args.specs:
        specs = args.specs
    model = load_model()
    puzzles = set_puzzles(args.set)
    rows = [r.to_dict() for r in bench_sudoku(model, puzzles[:args.limit],
                                              [LocalEntry.parse(s) for s in specs])]
    eb = sorted((r for r in rows if r["name"] == "eb"), key=lambda r: r["steps"])
    xs, ys = [r["steps"] for r in eb], [100 * r["solved"] for r in eb]

    table = Table(title=f"Sudoku {args.set}, first {args.limit} puzzles, shipped model; "
                        "EB frontier interpolated at equal passes")
    for col in ("sampler", "solved %", "passes", "cum. H", "clash %", "EB at passes", "diff"):
        table.add_column(col, justify="left" if col == "sampler" else "right")
    for r in sorted(rows, key=lambda r: r["steps"]):
        solved = 100 * r["solved"]
        inside = xs[0] <= r["steps"] <= xs[-1]
        ref = float(np.interp(r["steps"], xs, ys)) if inside else float("nan")
        table.add_row(r["label"], f"{solved:.1f}", f"{r['steps']:.1f}",
                      f"{r['cumulative_entropy']:.2f}", f"{100 * r['same_pass_clash']:.1f}",
                      f"{ref:.1f}" if inside else "-", f"{solved - ref:+.1f}" if inside else "-")
    Console(width=130).print(table)


if __name__ == "__main__":
    main()
