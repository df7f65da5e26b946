"""Pool the rows of several ``unmask sudoku bench --json`` runs on *different* puzzle sets
(for example the packaged 1,000 hard puzzles and a second 1,000 drawn under the same rule),
so that a comparison rests on all their puzzles:

    PYTHONPATH=src .venv/bin/python benchmarks/pool_bench_json.py \\
        docs/sudoku_bench_hard1000_c39f87eb.json docs/sudoku_bench_hardval1000_c39f87eb.json

Files of the same puzzle set (their ``set`` field) are one run: their rows are merged, the
first row of each label kept. A label is then pooled when every set has it: its per-puzzle
outcomes are concatenated, its mean passes weighted by each set's puzzle count.
Columns: solved %, mean NFE, the paired count against the pooled sequential row (+ solved
that it did not / - the reverse) and its size in noise widths, (gained - lost) /
sqrt(gained + lost); for every row but plain EB's, EB's pooled frontier (its rows without
``+verify`` or ``+corrector``) interpolated at its passes and the paired count against the
plain EB row nearest in passes.
"""

from __future__ import annotations

import argparse
import json
import math

import numpy as np

from unmask.bench import add_paired_vs, render_table

REFERENCE = "confidence"


def pooled_rows(files: list[dict]) -> list[dict]:
    """One row per label present in every puzzle set: outcomes concatenated, NFE weighted."""
    by_set: dict[str, dict[str, dict]] = {}
    for data in files:
        first = by_set.setdefault(str(data["set"]), {})
        for r in data["rows"]:
            first.setdefault(r["label"], r)
    sets = list(by_set.values())
    rows = []
    for label in sets[0]:
        parts = [f.get(label) for f in sets]
        if any(p is None or "solved_each" not in p for p in parts):
            continue
        each = "".join(p["solved_each"] for p in parts)
        nfe = sum(p["nfe"] * len(p["solved_each"]) for p in parts) / len(each)
        first = parts[0]
        plain = not (first.get("verified", "+verify" in label)
                     or first.get("corrected", "+corrector" in label))
        rows.append({"label": label, "name": first["name"], "plain": plain,
                     "solved_each": each, "solved_pct": 100 * each.count("1") / len(each),
                     "nfe": nfe})
    return rows


def widths(gained: int, lost: int) -> float:
    return (gained - lost) / math.sqrt(gained + lost) if gained + lost else 0.0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("json", nargs="+", help="bench JSON files, one per puzzle set")
    args = ap.parse_args()
    files = [json.loads(open(p, encoding="utf-8").read()) for p in args.json]
    rows = pooled_rows(files)
    ref = next((r for r in rows if r["label"] == REFERENCE), None)
    if ref is None:
        raise SystemExit(f"no '{REFERENCE}' row in every file: nothing to pair against")
    add_paired_vs(rows, ref)
    # EB's frontier: its plain rows (a verified or corrected EB row is compared against it)
    eb = sorted((r for r in rows if r["name"] == "eb" and r["plain"]), key=lambda r: r["nfe"])
    for r in rows:
        r["vs_seq"] = f"+{r['gained_vs_ref']}/-{r['lost_vs_ref']}"
        r["seq_widths"] = widths(r["gained_vs_ref"], r["lost_vs_ref"])
        if (r["name"] == "eb" and r["plain"]) or r is ref or not eb:
            continue
        if eb[0]["nfe"] <= r["nfe"] <= eb[-1]["nfe"]:
            r["eb_at"] = float(np.interp(r["nfe"], [e["nfe"] for e in eb],
                                         [e["solved_pct"] for e in eb]))
            r["eb_diff"] = r["solved_pct"] - r["eb_at"]
        near = min(eb, key=lambda e: abs(e["nfe"] - r["nfe"]))
        add_paired_vs([r], near)
        r["vs_eb"] = (f"+{r['gained_vs_ref']}/-{r['lost_vs_ref']} vs {near['label']} "
                      f"({near['nfe']:.1f})")
        r["eb_widths"] = widths(r["gained_vs_ref"], r["lost_vs_ref"])
    puzzles = len(ref["solved_each"])
    render_table(rows, [("sampler", "label", "s"), ("solved %", "solved_pct", ".2f"),
                        ("mean NFE", "nfe", ".2f"), ("vs seq. +/-", "vs_seq", "s"),
                        ("widths", "seq_widths", "+.1f"), ("EB at NFE", "eb_at", ".2f"),
                        ("diff", "eb_diff", "+.2f"), ("paired vs nearest EB", "vs_eb", "s"),
                        ("widths", "eb_widths", "+.1f")],
                 f"{puzzles} puzzles pooled from {len({str(f['set']) for f in files})} sets")


if __name__ == "__main__":
    main()
