"""Draw one Pareto plot (solved % against mean passes) from the rows of several
``unmask sudoku bench --json`` files, e.g. runs with and without the corrector:

    PYTHONPATH=src .venv/bin/python benchmarks/plot_bench_json.py \
        docs/sudoku_bench_hard1000_paired.json docs/sudoku_bench_hard1000_corrector.json \
        --out docs/img/sudoku_corrector_pareto.png --references

A row whose label appears in an earlier file is skipped (the first file's copy is drawn).
With ``--tags`` (one per file, e.g. the model each file measured) every row is drawn on its
file's own lines, "TAG sampler", so two models' frontiers can be compared:

    PYTHONPATH=src .venv/bin/python benchmarks/plot_bench_json.py \
        docs/sudoku_bench_hard1000_paired.json runs/ft/bench_states.json \
        --tags shipped fine-tuned --out pareto.png
"""

from __future__ import annotations

import argparse
import json

from unmask.bench import pareto_plot
from unmask.sudoku.bench import SEED_REFERENCE


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("json", nargs="+", help="bench JSON files")
    ap.add_argument("--out", required=True, help="PNG to write")
    ap.add_argument("--title", default=None)
    ap.add_argument("--samplers", nargs="+", default=None, metavar="LABEL",
                    help="only rows with these labels (default: all)")
    ap.add_argument("--references", action="store_true",
                    help="draw the published points (measured on the 1,000 hard puzzles)")
    ap.add_argument("--tags", nargs="+", default=None, metavar="TAG",
                    help="one per file: its rows are drawn as 'TAG sampler' lines")
    ap.add_argument("--xlim", nargs=2, type=float, default=None, metavar=("LO", "HI"),
                    help="zoom: the range of mean passes drawn")
    ap.add_argument("--ylim", nargs=2, type=float, default=None, metavar=("LO", "HI"),
                    help="zoom: the range of solved %% drawn")
    ap.add_argument("--target", type=float, default=None, metavar="F",
                    help="draw the 'confidence' row's solved %% and its passes / F as lines "
                         "(the target: sequential accuracy at 1/F of its passes)")
    args = ap.parse_args()
    if args.tags is not None and len(args.tags) != len(args.json):
        raise SystemExit(f"--tags: one per file ({len(args.json)}), got {len(args.tags)}")
    rows, seen, sets = [], set(), []
    for i, path in enumerate(args.json):
        tag = f"{args.tags[i]} " if args.tags else ""
        data = json.load(open(path))
        sets.append(f"{data.get('set')} x {data.get('puzzles')}")
        for r in data["rows"]:
            if tag + r["label"] in seen or (args.samplers and r["label"] not in args.samplers):
                continue
            seen.add(tag + r["label"])
            rows.append({**r, "label": tag + r["label"], "name": tag + r["name"],
                         "accuracy": r["solved"],
                         "corrected": r.get("corrected", "+corrector" in r["label"]),
                         "verified": r.get("verified", "+verify" in r["label"]),
                         "verify_tolerance": r.get("verify_tolerance", 1.0)})
    if len(set(sets)) > 1:
        raise SystemExit(f"the files measure different puzzle sets: {sorted(set(sets))}")
    title = args.title or f"Sudoku '{sets[0]}' puzzles: {len(rows)} rows"
    guides = []
    if args.target is not None:
        seq = next((r for r in rows if r["label"] == "confidence"), None)
        if seq is None:
            raise SystemExit("--target: no 'confidence' row among the rows drawn")
        guides = [("h", 100 * seq["solved"], f"sequential {100 * seq['solved']:.1f}%"),
                  ("v", seq["nfe"] / args.target,
                   f"1/{args.target:g} of sequential's {seq['nfe']:.1f} passes")]
    pareto_plot(rows, args.out, title=title,
                references=SEED_REFERENCE if args.references else (),
                xlim=tuple(args.xlim) if args.xlim else None,
                ylim=tuple(args.ylim) if args.ylim else None, guides=guides)
    print(f"plot: {args.out} ({len(rows)} rows)")


if __name__ == "__main__":
    main()
