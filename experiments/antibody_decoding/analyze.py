"""Tables of the random-masking sweep (results/*.json from run.sh): every row against
sequential confidence, and each MI-guided row against the EB row nearest in passes, paired by
chain (unmask.antibody.bench.paired_recovery).

    python experiments/antibody_decoding/analyze.py [results/random_100_*.json]
"""

import glob
import json
import sys
from pathlib import Path

from unmask.antibody.bench import paired_recovery


def load(paths: list[str]) -> list[dict]:
    rows = []
    for p in paths:
        rows += json.loads(Path(p).read_text())["rows"]
    return rows


def main() -> None:
    paths = sys.argv[1:] or sorted(glob.glob(str(Path(__file__).parent / "results/*.json")))
    rows = load(paths)
    seq = next(r for r in rows if r["label"] == "confidence")
    print("| sampler | recovery % | vs sequential (pts ± se) | NFE | residues/pass | "
          "sequences | wall s |")
    print("|---|---|---|---|---|---|---|")
    for r in sorted(rows, key=lambda r: -r["nfe"]):
        d = paired_recovery(r, seq) if r is not seq else None
        vs = "" if d is None else f"{d[0]:+.2f} ± {d[1]:.2f}"
        print(f"| {r['label']} | {100 * r['recovery']:.2f} | {vs} | {r['nfe']:.1f} | "
              f"{r['tokens_per_pass']:.2f} | {r['sequences']:.1f} | {r['wall_s']:.0f} |")
    eb = [r for r in rows if r["name"] == "eb"]
    print("\n| MI-guided | NFE | EB nearest in passes | NFE | MI-guided minus EB (pts ± se) |")
    print("|---|---|---|---|---|")
    for r in sorted((r for r in rows if r["name"] == "mi-guided"), key=lambda r: r["nfe"]):
        if not eb:
            break
        near = min(eb, key=lambda e: abs(e["nfe"] - r["nfe"]))
        d = paired_recovery(r, near)
        print(f"| {r['label']} | {r['nfe']:.1f} | {near['label']} | {near['nfe']:.1f} | "
              f"{d[0]:+.2f} ± {d[1]:.2f} |")


if __name__ == "__main__":
    main()
