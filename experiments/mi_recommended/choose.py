"""Choose an estimator's recommended MI-guided setting from bench results, and write it.

Rule: among the mi-guided rows measured on every set given, keep those within ``--margin``
points of sequential decoding (the ``confidence`` row of the same set) on every set; of
those, recommend the one with the fewest mean passes (ties: the most accurate). Rows are
matched across sets by their parameters. Each set is one or more bench JSON files
(``unmask ... bench --json``) joined with commas; at least one file per set must hold the
sequential row.

    python experiments/mi_recommended/choose.py --sets A.json,B.json C.json,D.json \
        --chosen-on "..." --write src/unmask/pretrained/sudoku_mi_estimator/recommended.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from unmask.samplers.base import parse_param_value


def params_of(label: str) -> dict:
    """The parameters of a row labelled ``NAME K=V ...`` (benches that record no params)."""
    return {k: parse_param_value(v) for k, v in (w.split("=", 1) for w in label.split()[1:])}


def rows_of(files: str) -> tuple[float, dict[str, dict]]:
    """(sequential accuracy in %, {params key: row}) of one set's files."""
    sequential, rows = None, {}
    for name in files.split(","):
        for row in json.loads(Path(name).read_text())["rows"]:
            accuracy = row.get("accuracy", row.get("solved"))
            if row["name"] == "confidence":
                sequential = 100 * accuracy
            elif row["name"] == "mi-guided" and not row.get("verified"):
                params = row.get("params") or params_of(row["label"])
                key = json.dumps(params, sort_keys=True)
                rows[key] = {"params": params, "accuracy": 100 * accuracy,
                             "passes": row["nfe"]}
    if sequential is None:
        raise SystemExit(f"error: no sequential (confidence) row in {files}")
    return sequential, rows


def choose(sets: list[str], margin: float) -> tuple[dict, list[dict]]:
    measured = [rows_of(s) for s in sets]
    common = set.intersection(*(set(rows) for _, rows in measured))
    table = []
    for key in sorted(common):
        per_set = [rows[key] for _, rows in measured]
        ok = all(r["accuracy"] >= seq - margin - 1e-9
                 for (seq, _), r in zip(measured, per_set, strict=True))
        table.append({"params": per_set[0]["params"], "ok": ok,
                      "accuracy": [round(r["accuracy"], 2) for r in per_set],
                      "sequential": [round(seq, 2) for seq, _ in measured],
                      "passes": sum(r["passes"] for r in per_set) / len(per_set)})
    keep = [r for r in table if r["ok"]]
    if not keep:
        raise SystemExit("error: no mi-guided row within the margin on every set")
    best = min(keep, key=lambda r: (r["passes"], -sum(r["accuracy"])))
    return best, table


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sets", nargs="+", required=True, help="per set: FILE[,FILE...]")
    ap.add_argument("--margin", type=float, default=0.5, help="points below sequential")
    ap.add_argument("--chosen-on", required=True, help="what the sweep measured, one line")
    ap.add_argument("--write", default=None, help="recommended.json to write")
    args = ap.parse_args()
    best, table = choose(args.sets, args.margin)
    for r in sorted(table, key=lambda r: r["passes"]):
        print(f"{'*' if r is best else ' '} {'ok ' if r['ok'] else '-- '}"
              f"passes {r['passes']:6.2f}  accuracy {r['accuracy']} (sequential "
              f"{r['sequential']})  {json.dumps(r['params'], sort_keys=True)}")
    record = {"params": best["params"], "chosen_on": args.chosen_on,
              "rule": f"fewest passes within {args.margin} points of sequential decoding on "
                      f"every set", "accuracy": best["accuracy"],
              "sequential": best["sequential"], "passes": round(best["passes"], 2)}
    if args.write:
        Path(args.write).write_text(json.dumps(record, indent=1) + "\n")
        print(f"wrote {args.write}")


if __name__ == "__main__":
    main()
