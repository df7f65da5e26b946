"""The tables of the runs made outside ``run.py``: multiplication (``unmask arithmetic
bench``, three seeds), digits (``unmask image bench``, FID / IS) and AntiBERTy's
unconditional heavy chains (``experiments/antibody_coherence``), each with the authors'
settings (``--preset info-gain-authors lookum-authors``) beside confidence and the earlier
rows.

    python experiments/info_gain_authors/report.py
"""

from __future__ import annotations

import json
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]


def paired(each: str, ref: str) -> str:
    gain = sum(a == "1" and b == "0" for a, b in zip(each, ref, strict=True))
    loss = sum(a == "0" and b == "1" for a, b in zip(each, ref, strict=True))
    return f"+{gain}/-{loss}"


def arithmetic() -> None:
    """Accuracy pooled over the seeds' files, paired against confidence item by item."""
    files = sorted(HERE.glob("arithmetic_seed*.json"))
    if not files:
        return
    pooled: dict[tuple, dict] = {}
    for f in files:
        for r in json.loads(f.read_text())["rows"]:
            name = (r["label"].split("preset=")[1] if "preset=" in r["label"]
                    else r["label"])
            p = pooled.setdefault((r["task"], name),
                                  {"each": "", "nfe": 0.0, "seqs": 0.0, "wall": 0.0, "n": 0,
                                   "revealed": 0.0})
            p["each"] += r["solved_each"]
            p["n"] += r["n_items"]
            p["nfe"] += r["nfe"] * r["n_items"]
            p["seqs"] += r["sequences"] * r["n_items"]
            p["revealed"] += r["revealed"] * r["n_items"]
            p["wall"] += r["wall_s"]
    print(f"multiplication: {len(files)} seeds pooled\n")
    print("| task | sampler | acc % | vs confidence | passes | seqs | seqs/token | wall s |")
    print("|---|---|---|---|---|---|---|---|")
    for (task, name), p in pooled.items():
        ref = pooled.get((task, "confidence"))
        vs = paired(p["each"], ref["each"]) if ref and name != "confidence" else ""
        acc = 100 * p["each"].count("1") / len(p["each"])
        print(f"| {task} | {name} | {acc:.1f} | {vs} | {p['nfe'] / p['n']:.2f} | "
              f"{p['seqs'] / p['n']:.1f} | {p['seqs'] / p['revealed']:.2f} | "
              f"{p['wall']:.0f} |")
    print()


def digits() -> None:
    """FID / IS / class accuracy of each run, the earlier rows of the same n and seed (so the
    same prompts and per-row seeds) beside them."""
    earlier = {"draw": ROOT / "experiments/image/bench_n400.json",
               "max": ROOT / "experiments/image/bench_n400_confmax_paired.json"}
    print("| confidence | sampler | FID | IS | class acc % | passes | seqs | wall s | run |")
    print("|---|---|---|---|---|---|---|---|---|")
    for mode in ("draw", "max"):
        path = HERE / f"digits_n400_{mode}.json"
        if not path.exists():
            continue
        rows = [(r, "this") for r in json.loads(path.read_text())["rows"]]
        rows += [(r, "earlier") for r in json.loads(earlier[mode].read_text())["rows"]
                 if r["sampler"] in ("info-gain", "margin", "uniform")]
        for r, run in rows:
            name = r["label"].split("preset=")[1] if "preset=" in r["label"] else r["sampler"]
            is_ = r.get("inception_score")
            print(f"| {mode} | {name} | {r['fid']:.1f} ± {r['fid_se']:.1f} | "
                  f"{'' if is_ is None else f'{is_:.2f}'} | {100 * r['class_accuracy']:.1f} | "
                  f"{r['nfe']:.1f} | {r['sequences']:.1f} | {r['wall_s']:.0f} | {run} |")
    print()


def antibody() -> None:
    """Heavy share and PLL of unconditional chains, paired by chain against sequential
    confidence decoding (its run in base_118_T1)."""
    path = ROOT / "experiments/antibody_coherence/results/info_gain_118_T1_table.json"
    if not path.exists():
        return
    base = json.loads((path.parent / "base_118_T1_table.json").read_text())
    rows = [r for r in base if r["spec"] == "confidence"] + [
        r for r in json.loads(path.read_text()) if r["spec"] != "confidence"]
    print("| sampler | heavy | vs confidence | PLL / residue | vs confidence | passes | "
          "seqs | wall s |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        hv, pv = r.get("heavy_vs_ref"), r.get("pll_vs_ref")
        print(f"| {r['spec']} | {r['heavy']}/{r['chains']} | "
              f"{'' if hv is None else f'{hv[0]:+.2f} ± {hv[1]:.2f}'} | {r['pll']:.3f} | "
              f"{'' if pv is None else f'{pv[0]:+.3f} ± {pv[1]:.3f}'} | {r['passes']:.1f} | "
              f"{r['sequences']:.1f} | {r['wall_s']:.0f} |")


if __name__ == "__main__":
    arithmetic()
    digits()
    antibody()
