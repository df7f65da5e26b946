"""MI-guided against EB-Sampler at matched passes on the reasoning bench (pooled rows of
results_reasoning_100.json from run_bench.sh): each MI-guided row beside the EB row nearest in
passes, with the paired counts (problems only one of the two solves).

    python experiments/text_mi_estimator/analyze.py [results_reasoning_100.json]
"""

import json
import math
import sys
from pathlib import Path


def main() -> None:
    path = Path(sys.argv[1] if len(sys.argv) > 1
                else Path(__file__).parent / "results_reasoning_100.json")
    rows = [r for r in json.loads(path.read_text())["rows"] if r["task"] == "pooled"]
    eb = [r for r in rows if r["name"] == "eb"]
    print("| MI-guided | acc % | NFE | EB nearest in passes | acc % | NFE | MI only / EB only "
          "| (a - b) / sqrt(a + b) |")
    print("|---|---|---|---|---|---|---|---|")
    for r in sorted((r for r in rows if r["name"] == "mi-guided"), key=lambda r: r["nfe"]):
        e = min(eb, key=lambda e: abs(e["nfe"] - r["nfe"]))
        a = sum(x == "1" and y == "0" for x, y in zip(r["solved_each"], e["solved_each"],
                                                       strict=True))
        b = sum(x == "0" and y == "1" for x, y in zip(r["solved_each"], e["solved_each"],
                                                       strict=True))
        z = (a - b) / math.sqrt(a + b) if a + b else 0.0
        label = r["label"].replace("free_max=True stop_at_first_miss=True", "FM")
        print(f"| {label} | {100 * r['accuracy']:.1f} | {r['nfe']:.2f} | {e['label']} | "
              f"{100 * e['accuracy']:.1f} | {e['nfe']:.2f} | +{a}/-{b} | {z:+.2f} |")


if __name__ == "__main__":
    main()
