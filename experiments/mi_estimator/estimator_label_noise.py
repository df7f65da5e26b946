"""How much of the estimator's held-out score is the estimator, and how much the labels' noise.

Labels are probed with eps > 0 (tokens with p_i(v) < eps are not probed), which bounds each
MI value's error but leaves weak pairs' ranks to that error. This script re-probes the held-out
contexts of a label folder exactly (eps = 0) and prints, per mask-ratio bucket, the metrics of
`unmask mi eval` for:

- the stored labels against the exact MI (the ceiling any estimator scored on those labels
  can reach: an estimator equal to the exact MI would score this);
- each estimator against the stored labels (what `unmask mi eval` reports);
- each estimator against the exact MI.

    PYTHONPATH=src .venv/bin/python experiments/mi_estimator/estimator_label_noise.py \\
        --labels runs/mi_estimator/labels-FP --estimators sudoku_mi_estimator runs/x/best

The exact MI is cached next to the labels (`exact-heldout.safetensors`), keyed by the held-out
split, so a rerun with other estimators does not probe again.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from unmask.io import atomic_path
from unmask.metrics import held_out_mask
from unmask.mi import perturbation_mi
from unmask.mi.estimator import load_estimator
from unmask.mi.estimator_eval import compute_features, evaluate_predictions, predict
from unmask.mi.label_set import LabelSet
from unmask.mi.labels import get_task


def exact_mi(model, tokens: torch.Tensor, cache: Path, batch_size: int) -> torch.Tensor:
    """(M, N, N) MI of ``tokens`` probed with eps = 0, cached in ``cache``."""
    if cache.is_file():
        stored = load_file(str(cache))
        if torch.equal(stored["tokens"], tokens):
            return stored["mi"]
    t0 = time.perf_counter()
    parts = []
    for lo in range(0, len(tokens), 16):
        parts.append(perturbation_mi(model, tokens[lo:lo + 16], eps=0.0,
                                     batch_size=batch_size).mi.float())
        print(f"  exact probing: {min(lo + 16, len(tokens))}/{len(tokens)} contexts "
              f"({time.perf_counter() - t0:.0f} s)", flush=True)
    mi = torch.cat(parts)
    with atomic_path(cache) as tmp:
        save_file({"tokens": tokens.contiguous(), "mi": mi.contiguous()}, str(tmp))
    return mi


def rows(name: str, r: dict) -> list[str]:
    out = [f"| {name} | all | {r['pairs']} | {r['mse']:.2e} | {r['pearson']:.3f} | "
           f"{r['spearman']:.3f} | {r['top_decile_recall']:.3f} | {r['spearman_within']:.3f} |"]
    for b in r["buckets"]:
        if b["pairs"]:
            lo, hi = b["mask_ratio"]
            out.append(f"| | {lo:.2f}-{hi:.2f} | {b['pairs']} | {b['mse']:.2e} | "
                       f"{b['pearson']:.3f} | {b['spearman']:.3f} | "
                       f"{b['top_decile_recall']:.3f} | |")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--labels", required=True)
    ap.add_argument("--estimators", nargs="+", default=["sudoku_mi_estimator"])
    ap.add_argument("--held-out", type=float, default=0.1)
    ap.add_argument("--split-seed", type=int, default=0)
    ap.add_argument("--limit", type=int, default=None, help="first N held-out contexts")
    ap.add_argument("--batch-size", type=int, default=2048)
    ap.add_argument("--threads", type=int, default=None)
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)

    labels = LabelSet.from_dir(args.labels)
    task = get_task(labels.identity.get("task", "sudoku"))
    model = task.load_model(None)
    labels.check_model(model)
    held = held_out_mask(labels.groups, args.held_out, args.split_seed).nonzero()[:, 0]
    if args.limit:
        held = held[:args.limit]
    tokens, stored = labels.tokens[held], labels.mi[held]
    masked = tokens == model.mask_id
    eps = labels.identity.get("eps", "?")
    print(f"{len(held)} held-out contexts of {args.labels} (labels probed at eps {eps})")
    exact = exact_mi(model, tokens, Path(args.labels) / "exact-heldout.safetensors",
                     args.batch_size)
    err = (stored - exact).abs()
    print(f"stored labels vs exact: max |error| {float(err.max()):.2e} nats, mean "
          f"{float(err[masked[:, :, None] & masked[:, None, :]].mean()):.2e}")

    print("\n| scored | mask ratio | pairs | MSE | Pearson | Spearman | top-10% | within Sp. |")
    print("|---|---|---|---|---|---|---|---|")
    for line in rows(f"labels (eps {eps}) vs exact", evaluate_predictions(stored, exact, masked)):
        print(line)
    for name in args.estimators:
        est = load_estimator(name, model)
        pred = predict(est, compute_features(model, tokens, est.config), masked)
        for line in rows(f"{name} vs labels", evaluate_predictions(pred, stored, masked)):
            print(line)
        for line in rows(f"{name} vs exact", evaluate_predictions(pred, exact, masked)):
            print(line)


if __name__ == "__main__":
    main()
