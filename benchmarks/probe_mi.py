"""Perturbation-probing MI: pruned cost and error against unpruned probing, on Sudoku contexts.

For each mask ratio (and for contexts drawn like the labels, ratio uniform in [0.05, 1)) and
each eps: sequences evaluated against the naive 1 + |M||V| and against the floor
1 + sum_i |{v : p_i(v) >= eps}|, wall time, sequences/s against the model's plain forward
throughput at the same batch size, and the largest |MI error| against eps = 0 next to the
largest stated bound.

    PYTHONPATH=src .venv/bin/python benchmarks/probe_mi.py --model runs/sudoku/best
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch
from gpu import ModelSpans

from unmask.mi import floor_sequences, naive_sequences, perturbation_mi
from unmask.models import MDMTransformer, TransformerConfig
from unmask.models.auto import load_model
from unmask.sudoku.labels import sudoku_contexts

SEED = 424242  # benchmark contexts: a stream of their own


def load(path: str) -> tuple[MDMTransformer, str]:
    """A model folder, or a training checkpoint file (checkpoint.pt) while training runs."""
    p = Path(path)
    if p.is_file():
        state = torch.load(p, map_location="cpu", weights_only=True)
        model = MDMTransformer(TransformerConfig(**state["model_config"]))
        model.load_state_dict(state["model"])
        return model.eval(), f"{p} (checkpoint, step {state['step']})"
    model = load_model(path)
    train = getattr(model, "metadata", {}).get("train", {})
    note = f"step {train.get('step', '?')}, hard accuracy {train.get('accuracy', '?')}"
    return model, f"{path} ({note})"


def forward_throughput(model, tokens: torch.Tensor, batch_size: int, repeats: int) -> float:
    """Sequences/s of plain forward passes on batches of ``batch_size`` sequences."""
    x = tokens[torch.arange(batch_size) % len(tokens)]
    with torch.inference_mode():
        model(x)  # warm-up
        t0 = time.perf_counter()
        for _ in range(repeats):
            model(x)
    return repeats * batch_size / (time.perf_counter() - t0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="runs/sudoku/best")
    ap.add_argument("--contexts", type=int, default=2, help="contexts per mask ratio")
    ap.add_argument("--ratios", default="0.3,0.6,0.9")
    ap.add_argument("--label-contexts", type=int, default=4,
                    help="contexts drawn like the labels (ratio uniform in [0.05, 1))")
    ap.add_argument("--eps", default="1e-4,1e-3,1e-2")
    ap.add_argument("--batch-size", type=int, default=1024)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--bf16", action="store_true")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    model, note = load(args.model)
    model.autocast_bf16 = args.bf16
    print(f"model: {note}; {'bf16' if args.bf16 else 'fp32'}, batch {args.batch_size}, "
          f"{torch.get_num_threads()} threads")

    groups = [(f"{r:.1f}", sudoku_contexts(SEED, 0, args.contexts, (r, r + 1e-9)))
              for r in (float(s) for s in args.ratios.split(","))]
    groups.append(("U[.05,1)", sudoku_contexts(SEED + 1, 0, args.label_contexts, (0.05, 1.0))))
    fwd = forward_throughput(model, groups[0][1], args.batch_size, repeats=2)
    print(f"plain forward: {fwd:,.0f} sequences/s; 'in model' = share of probing wall time "
          "spent in model forwards\n")
    eps_list = [float(e) for e in args.eps.split(",")]
    header = ("| ratio | eps | sequences | naive | floor | naive/seq | per-ctx mean | wall s | "
              "seq/s | vs forward | in model | max abs err | max bound |")
    print(header)
    print("|" + "---|" * (header.count("|") - 1))
    for name, tokens in groups:
        naive_rows = naive_sequences(tokens, model.mask_id, len(model.real_token_ids))
        naive = int(naive_rows.sum())
        exact = None
        for eps in [0.0, *eps_list]:
            with ModelSpans(model, "cpu") as spans:
                t0 = time.perf_counter()
                res = perturbation_mi(model, tokens, eps=eps, batch_size=args.batch_size)
                wall = time.perf_counter() - t0
            per_ctx = float((naive_rows / res.row_sequences).mean())
            exact = res if eps == 0.0 else exact
            floor = int(floor_sequences(res).sum())
            err = float((res.mi - exact.mi).abs().max())
            rate = res.sequences / wall
            print(f"| {name} | {eps:g} | {res.sequences:,} | {naive:,} | {floor:,} | "
                  f"{naive / res.sequences:.2f}x | {per_ctx:.2f}x | {wall:.1f} | {rate:,.0f} | "
                  f"{rate / fwd:.2f} | {spans.seconds / wall:.1%} | {err:.2e} | "
                  f"{float(res.error_bound.max()):.2e} |",
                  flush=True)


if __name__ == "__main__":
    main()
