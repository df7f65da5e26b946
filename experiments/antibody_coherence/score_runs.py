"""Score the runs decode_runs.py wrote: chain type (ANARCI's HMMs through pyhmmer), AntiBERTy
pseudo-log-likelihood per residue, diversity, passes, wall; paired against a reference run
(chain i of every run decoded with seed i).

    python experiments/antibody_coherence/score_runs.py DIR [--reference confidence] \
        [--positions 24]

--positions K estimates each chain's pseudo-log-likelihood on K residue positions drawn once
per chain index (the same positions for every run: an unbiased, paired estimate of the mean
over all positions at K/L of the cost); 0 = every position. Scores are cached in
DIR/scores.json (per run file and K)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import torch

from unmask.antibody.metrics import encode_sequence, mean_pairwise_identity
from unmask.antibody.typing import chain_types
from unmask.models.auto import load_model


def sampled_pll(model, texts: list[str], k: int, seed: int = 0) -> list[float]:
    """Per chain: mean log p(x_i | x without i) over k positions drawn for chain index i
    (all positions with k = 0), renormalised over real tokens."""
    real = model.real_token_mask
    rows, where = [], []
    for c, text in enumerate(texts):
        ids = torch.tensor(encode_sequence(model, text))
        pos = real[ids].nonzero().squeeze(1)
        if 0 < k < len(pos):
            pick = np.random.default_rng([seed, c]).choice(len(pos), size=k, replace=False)
            pos = pos[np.sort(pick)]
        for p in pos.tolist():
            x = ids.clone()
            x[p] = model.mask_id
            rows.append((c, p, int(ids[p])))
            where.append(x)
    out = np.zeros(len(texts))
    count = np.zeros(len(texts))
    for at in range(0, len(where), 64):
        x = torch.stack(where[at:at + 64])
        part = rows[at:at + 64]
        with torch.inference_mode():
            logits = model(x).logits.double()
        idx = torch.arange(len(part))
        pos = torch.tensor([p for _, p, _ in part])
        logp = torch.log_softmax(logits[idx, pos].masked_fill(~real, -torch.inf), -1)
        tok = torch.tensor([t for _, _, t in part])
        lp = logp[idx, tok].numpy()
        for (c, _, _), v in zip(part, lp, strict=True):
            out[c] += v
            count[c] += 1
    return (out / np.maximum(count, 1)).tolist()


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("dir")
    p.add_argument("--reference", default="confidence")
    p.add_argument("--positions", type=int, default=24)
    p.add_argument("--reference-dir", default=None,
                   help="take the reference run from this folder (scored there)")
    p.add_argument("--cached-only", action="store_true",
                   help="report the runs already scored, score nothing")
    p.add_argument("--reverse", action="store_true", help="score the files in reverse order")
    p.add_argument("--first", nargs="*", default=[],
                   help="score the files whose names contain these first")
    args = p.parse_args()
    torch.set_num_threads(1)
    folder = Path(args.dir)
    cache_path = folder / "scores.json"
    cache = json.loads(cache_path.read_text()) if cache_path.exists() else {}
    model = None
    runs = {}
    files = sorted(folder.glob("*.json"), reverse=args.reverse)
    files.sort(key=lambda f: not any(w in f.name for w in args.first))
    for f in files:
        if f.name == "scores.json":
            continue
        run = json.loads(f.read_text())
        key = f"{f.name}|{args.positions}"
        if key not in cache and args.cached_only:
            continue
        if key not in cache:
            model = model or load_model("antiberty")
            types = chain_types(run["texts"])
            cache[key] = {"chain": [t.chain for t in types],
                          "heavy_margin": [t.heavy_margin for t in types],
                          "pll": sampled_pll(model, run["texts"], args.positions)}
            # another scorer may have written meanwhile: keep its entries
            if cache_path.exists():
                cache = {**json.loads(cache_path.read_text()), key: cache[key]}
            cache_path.write_text(json.dumps(cache, indent=1))
        block = f" [blocks of {run['block_length']}]" if run.get("block_length") else ""
        runs[run["spec"] + block] = (run, cache[key])
    if args.reference_dir:  # the reference run of another folder, its scores cached there
        other = Path(args.reference_dir)
        ref = next(f for f in other.glob("*.json") if f.name != "scores.json"
                   and json.loads(f.read_text())["spec"] == args.reference)
        runs[args.reference] = (json.loads(ref.read_text()), json.loads(
            (other / "scores.json").read_text())[f"{ref.name}|{args.positions}"])
    report(runs, args.reference, folder)


def paired(a: list[float], b: list[float]) -> tuple[float, float]:
    """(mean, standard error) of a - b over the chains both hold (the first ones)."""
    n = min(len(a), len(b))
    d = np.asarray(a[:n], float) - np.asarray(b[:n], float)
    return float(d.mean()), float(d.std(ddof=1) / np.sqrt(len(d))) if len(d) > 1 else 0.0


def report(runs: dict, reference: str, folder: Path) -> None:
    ref = runs.get(reference)
    rows = []
    for spec, (run, sc) in runs.items():
        heavy = [c == "H" for c in sc["chain"]]
        n = len(heavy)
        nfe = float(np.mean(run["nfe"]))
        row = {"spec": spec, "chains": n, "heavy": sum(heavy),
               "heavy_share": sum(heavy) / n,
               "chain_types": {t or "none": sc["chain"].count(t) for t in set(sc["chain"])},
               "pll": float(np.mean(sc["pll"])), "passes": nfe,
               "residues_per_pass": run["length"] / nfe,
               "identity": mean_pairwise_identity(run["texts"]),
               "wall_s": run["wall_s"], "sequences": float(np.mean(run["sequences"]))}
        if ref is not None and spec != reference:
            hv = [float(c == "H") for c in ref[1]["chain"]]
            row["heavy_vs_ref"] = paired([float(h) for h in heavy], hv)
            row["pll_vs_ref"] = paired(sc["pll"], ref[1]["pll"])
        rows.append(row)
    rows.sort(key=lambda r: r["passes"], reverse=True)
    print(f"{'sampler':48s} {'heavy':>7s} {'vs ref':>12s} {'PLL/res':>8s} {'vs ref':>14s} "
          f"{'passes':>7s} {'res/pass':>8s} {'ident':>6s} {'wall s':>7s}")
    for r in rows:
        hv = r.get("heavy_vs_ref")
        pv = r.get("pll_vs_ref")
        print(f"{r['spec'][:48]:48s} {r['heavy']:>3d}/{r['chains']:<3d} "
              f"{'' if hv is None else f'{hv[0]:+.2f}±{hv[1]:.2f}':>12s} {r['pll']:8.3f} "
              f"{'' if pv is None else f'{pv[0]:+.3f}±{pv[1]:.3f}':>14s} {r['passes']:7.1f} "
              f"{r['residues_per_pass']:8.2f} {r['identity']:6.3f} {r['wall_s']:7.1f}")
    (folder.parent / f"{folder.name}_table.json").write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
