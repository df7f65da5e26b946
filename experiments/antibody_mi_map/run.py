"""The pairwise MI map of one held-out heavy chain under AntiBERTy: ground truth by probing
(and the shipped estimator beside it): do the CDR loops light up?

Two contexts of the chain: every residue masked, and 60% masked at random (the high-ratio
setting, seed 0). Writes the PNG and a JSON of the region summaries.

    python experiments/antibody_mi_map/run.py --out-png docs/img/antibody_mi_map.png
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import torch

from unmask.antibody import CDRS, load_heavy_chains, make_template, random_masking
from unmask.infill import encode_text
from unmask.mi.estimator import estimate_mi, load_estimator
from unmask.mi.probe import perturbation_mi
from unmask.models.auto import load_model

HERE = Path(__file__).parent


def contexts(model, chain) -> tuple[torch.Tensor, list[str]]:
    """(2, N) token rows: the chain all masked, and 60% masked at random."""
    full = make_template(chain.sequence, np.ones(len(chain.sequence), bool))
    rand = random_masking([chain], ratio=0.6, seed=0)[0].template
    rows = [encode_text(model.tokenizer, t) for t in (full, rand)]
    return torch.tensor(rows, dtype=torch.long), ["all masked", "60% masked"]


def summary(mi: np.ndarray, masked: np.ndarray, cdr: np.ndarray) -> dict:
    """Mean MI (nats) over masked pairs within the CDRs, CDR x framework and within the
    framework, and the CDR share of the top 5% pairs. mi: (L, L); masked, cdr: (L,) bool."""
    iu = np.triu_indices(len(mi), k=1)
    ok = masked[iu[0]] & masked[iu[1]]
    a, b, v = cdr[iu[0]][ok], cdr[iu[1]][ok], mi[iu][ok]
    top = v >= np.quantile(v, 0.95)
    kinds = {"cdr_cdr": a & b, "cdr_fr": a ^ b, "fr_fr": ~a & ~b}
    out = {k: float(v[m].mean()) if m.any() else None for k, m in kinds.items()}
    out["pairs"] = int(ok.sum())
    out["top5pct_with_a_cdr_end"] = float((a | b)[top].mean())
    out["share_of_pairs_with_a_cdr_end"] = float((a | b).mean())
    return out


def draw(maps: list[np.ndarray], masks: list[np.ndarray], titles: list[str], chain,
         cdr_mask: np.ndarray, path: Path) -> None:
    """Heat maps of (L, L) MI, grey where a pair is not masked, CDR bounds as lines."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(maps), figsize=(4.0 * len(maps), 3.9), dpi=72)
    cmap = plt.get_cmap("magma").copy()
    cmap.set_bad("0.8")
    for ax, m, masked, title in zip(np.atleast_1d(axes), maps, masks, titles, strict=True):
        shown = np.ma.masked_where(~(masked[:, None] & masked[None, :]), m)
        top = np.quantile(m[m > 0], 0.99) if (m > 0).any() else 1.0
        im = ax.imshow(shown, cmap=cmap, vmin=0, vmax=top, interpolation="nearest")
        for lo, hi in _runs(cdr_mask):
            for x in (lo - 0.5, hi + 0.5):
                ax.axvline(x, color="cyan", lw=0.6)
                ax.axhline(x, color="cyan", lw=0.6)
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("residue", fontsize=8)
        fig.colorbar(im, ax=ax, fraction=0.046, pad=0.02).ax.tick_params(labelsize=7)
        ax.tick_params(labelsize=7)
    fig.suptitle(f"pairwise MI (nats) under AntiBERTy, {chain.name}; CDRs between the cyan "
                 "lines; grey: given residues", fontsize=9)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def _runs(mask: np.ndarray) -> list[tuple[int, int]]:
    idx = np.flatnonzero(mask)
    breaks = np.flatnonzero(np.diff(idx) > 1)
    starts = np.r_[idx[0], idx[breaks + 1]]
    ends = np.r_[idx[breaks], idx[-1]]
    return list(zip(starts.tolist(), ends.tolist(), strict=True))


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--chain", default="human IGHV1-2*02")
    p.add_argument("--estimator", default=None, help="estimator folder or shipped name")
    p.add_argument("--top-k", type=int, default=8)
    p.add_argument("--eps", type=float, default=1e-3)
    p.add_argument("--out-png", default="docs/img/antibody_mi_map.png")
    p.add_argument("--out-json", default=str(HERE / "results.json"))
    p.add_argument("--cache", default=None, help=".npz of the probed maps (reused if there)")
    args = p.parse_args()
    torch.set_num_threads(1)
    model = load_model("antiberty")
    (chain,) = [c for c in load_heavy_chains("held_out") if c.name == args.chain]
    tokens, names = contexts(model, chain)
    masked = (tokens == model.mask_id).numpy()[:, 1:-1]
    t0 = time.perf_counter()
    if args.cache and Path(args.cache).is_file():
        gt = np.load(args.cache)["gt"]
    else:
        res = perturbation_mi(model, tokens, eps=args.eps, top_k=args.top_k)
        gt = res.mi.numpy()[:, 1:-1, 1:-1]
        print(f"probing: {res.sequences} sequences, {time.perf_counter() - t0:.0f} s")
        if args.cache:
            np.savez_compressed(args.cache, gt=gt)
    cdr = chain.region_mask(CDRS)
    result = {"chain": chain.name, "sequence": chain.sequence, "top_k": args.top_k,
              "eps": args.eps, "gt": {n: summary(gt[i], masked[i], cdr)
                                      for i, n in enumerate(names)}}
    maps, titles = [gt[0], gt[1]], [f"ground truth, {names[0]}", f"ground truth, {names[1]}"]
    masks = [masked[0], masked[1]]
    if args.estimator:
        est = estimate_mi(model, load_estimator(args.estimator, model), tokens).numpy()
        est = est[:, 1:-1, 1:-1]
        result["estimator"] = {n: summary(est[i], masked[i], cdr) for i, n in enumerate(names)}
        iu = np.triu_indices(gt.shape[1], k=1)
        from scipy.stats import spearmanr
        result["estimator_spearman_vs_gt"] = {
            n: float(spearmanr(gt[i][iu][(masked[i][iu[0]] & masked[i][iu[1]])],
                               est[i][iu][(masked[i][iu[0]] & masked[i][iu[1]])])[0])
            for i, n in enumerate(names)}
        maps.append(est[1])
        masks.append(masked[1])
        titles.append(f"estimator, {names[1]}")
    draw(maps, masks, titles, chain, cdr, Path(args.out_png))
    Path(args.out_json).write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
