"""MI-guided decoding against each published rule at matched passes, paired per puzzle.

For every row of the rule runs (``sudoku_hard100.json``, ``sudoku_hard100_sweep.json``) this
takes the MI-guided row of ``sudoku_hard100_mi.json`` with the most passes not above the
rule's (MI-guided at equal or fewer passes) and counts the puzzles each solves that the other
does not. All three files decode the same 100 puzzles with the same model (their sequential
rows agree puzzle for puzzle; checked here).

Usage: python experiments/decoders/matched.py [--json OUT]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

HERE = Path(__file__).parent
RULES = ("sudoku_hard100.json", "sudoku_hard100_sweep.json")
MI = "sudoku_hard100_mi.json"


def paired(a: str, b: str) -> tuple[int, int]:
    """(puzzles a solves and b does not, the reverse) from '0'/'1' strings."""
    return (sum(x == "1" and y == "0" for x, y in zip(a, b, strict=True)),
            sum(x == "0" and y == "1" for x, y in zip(a, b, strict=True)))


def matched_rows() -> list[dict]:
    files = [json.loads((HERE / f).read_text()) for f in (*RULES, MI)]
    sequential = {f["rows"][0]["solved_each"] for f in files}
    assert len(sequential) == 1, "the files' sequential rows differ: not the same puzzles"
    mi = sorted((r for r in files[-1]["rows"] if r["name"] == "mi-guided"),
                key=lambda r: r["steps"])
    out = []
    for r in (r for f in files[:-1] for r in f["rows"] if r["name"] != "confidence"):
        below = [m for m in mi if m["steps"] <= r["steps"] + 1e-9]
        if not below:
            out.append({"rule": r["label"], "rule_solved": r["solved"],
                        "rule_passes": r["steps"], "mi": None})
            continue
        m = below[-1]
        gained, lost = paired(m["solved_each"], r["solved_each"])
        out.append({"rule": r["label"], "rule_solved": r["solved"], "rule_passes": r["steps"],
                    "mi": m["label"], "mi_solved": m["solved"], "mi_passes": m["steps"],
                    "mi_gained": gained, "mi_lost": lost})
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, default=None, help="also write the rows here")
    args = parser.parse_args()
    rows = matched_rows()
    print("| rule | solved % | passes | MI-guided at <= passes | solved % | passes | "
          "MI +/- vs rule |")
    print("|---|---:|---:|---|---:|---:|---:|")
    for r in rows:
        if r["mi"] is None:
            print(f"| {r['rule']} | {100 * r['rule_solved']:.1f} | {r['rule_passes']:.1f} "
                  "| none at so few passes | | | |")
            continue
        print(f"| {r['rule']} | {100 * r['rule_solved']:.1f} | {r['rule_passes']:.1f} | "
              f"{r['mi'].replace('mi-guided ', '').replace(' order=confidence', '')} | "
              f"{100 * r['mi_solved']:.1f} | {r['mi_passes']:.1f} | "
              f"+{r['mi_gained']}/-{r['mi_lost']} |")
    if args.json is not None:
        args.json.write_text(json.dumps({"rows": rows}, indent=2) + "\n")


if __name__ == "__main__":
    main()
