"""Tables of the random-masking sweep (results/*.json from run.sh): every row against
sequential confidence, and each MI-guided row against the EB row nearest in passes, paired by
chain (unmask.antibody.bench.paired_recovery).

    python experiments/antibody_decoding/analyze.py results/random_100_*.json
    python experiments/antibody_decoding/analyze.py results/random_221_*.json   # seeds pooled
"""

import glob
import json
import sys
from pathlib import Path

from unmask.antibody.bench import paired_recovery
from unmask.bench.contract import BenchRow


def paired(row: dict, ref: dict) -> tuple[float, float] | None:
    """:func:`paired_recovery` of two rows as the files hold them."""
    return paired_recovery(BenchRow.from_dict(row), BenchRow.from_dict(ref))


def load(paths: list[str]) -> list[dict]:
    """The rows of ``paths``; rows of one label from several files (other mask seeds) are
    pooled: their per-chain lists concatenated, in the order of ``paths``."""
    rows: dict[str, dict] = {}
    for p in paths:
        for r in json.loads(Path(p).read_text())["rows"]:
            if r["label"] not in rows:
                rows[r["label"]] = dict(r)
                continue
            q = rows[r["label"]]
            for key in ("recovered_each", "masked_each", "nfe_each"):
                q[key] = q[key] + r[key]
            q["wall_s"] += r["wall_s"]
    for r in rows.values():
        r["n_items"] = len(r["nfe_each"])
        r["nfe"] = sum(r["nfe_each"]) / r["n_items"]
        r["recovery"] = sum(r["recovered_each"]) / sum(r["masked_each"])
        r["tokens_per_pass"] = sum(r["masked_each"]) / r["n_items"] / r["nfe"]
    return list(rows.values())


def _nfe(row: dict, chains: int) -> float:
    """``row``'s mean passes over its first ``chains`` chains (an oracle row covers a few)."""
    return sum(row["nfe_each"][:chains]) / min(chains, len(row["nfe_each"]))


def main() -> None:
    paths = sys.argv[1:] or sorted(glob.glob(str(Path(__file__).parent / "results/*.json")))
    rows = load(paths)
    seq = next((r for r in rows if r["label"] == "confidence"), None)
    print("| sampler | chains | recovery % | vs sequential (pts ± se) | NFE | residues/pass | "
          "sequences | wall s |")
    print("|---|---|---|---|---|---|---|---|")
    for r in sorted(rows, key=lambda r: -r["nfe"]):
        d = paired(r, seq) if seq is not None and r is not seq else None
        vs = "" if d is None else f"{d[0]:+.2f} ± {d[1]:.2f}"
        print(f"| {r['label']} | {r['n_items']} | {100 * r['recovery']:.2f} | {vs} | "
              f"{r['nfe']:.1f} | "
              f"{r['tokens_per_pass']:.2f} | {r['sequences']:.1f} | {r['wall_s']:.0f} |")
    eb = [r for r in rows if r["name"] == "eb"]
    print("\n| MI-guided | NFE | EB nearest in passes | NFE | MI-guided minus EB (pts ± se) |")
    print("|---|---|---|---|---|")
    for r in sorted((r for r in rows if r["name"] in ("mi-guided", "mi-oracle")),
                    key=lambda r: r["nfe"]):
        if not eb:
            break
        near = min(eb, key=lambda e: abs(_nfe(e, r["n_items"]) - r["nfe"]))
        d = paired(r, near)
        print(f"| {r['label']} | {r['nfe']:.1f} | {near['label']} | "
              f"{_nfe(near, r['n_items']):.1f} | "
              f"{d[0]:+.2f} ± {d[1]:.2f} |")


if __name__ == "__main__":
    main()
