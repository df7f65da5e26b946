"""Overhead of the decode loop: time in the model vs time in the loop + sampler.

Decodes a batch of fully masked sequences with sequential confidence decoding (k=1), once
with `unmask.decode` and once with the same decode written as a per-row Python loop (each
row's sampler step done in Python, as in common reference code), and prints both side by
side with their ratio. The model is the same small transformer in both; its time is
measured by wrapping forward.

    python benchmarks/decode_loop.py [--batch 256] [--length 81] [--threads 2]
"""

from __future__ import annotations

import argparse
import time

import torch
from rich.console import Console
from rich.table import Table

from unmask import DecodeConfig, MDMTransformer, TransformerConfig, decode
from unmask.probs import real_log_probs


class TimedModel(torch.nn.Module):
    """Wraps a model and accumulates the seconds spent in its forward."""

    def __init__(self, model):
        super().__init__()
        self.inner = model
        self.seconds = 0.0
        for name in ("vocab_size", "mask_id", "max_length", "hidden_size", "real_token_ids"):
            setattr(self, name, getattr(model, name))

    real_token_mask = MDMTransformer.real_token_mask
    check_tokens = MDMTransformer.check_tokens

    def forward(self, tokens, output_hidden_layers=False):
        t0 = time.perf_counter()
        out = self.inner(tokens, output_hidden_layers)
        self.seconds += time.perf_counter() - t0
        return out


def per_row_decode(model: TimedModel, tokens: torch.Tensor) -> torch.Tensor:
    """Sequential confidence decoding with a Python loop over rows inside every step."""
    x = tokens.clone()
    real = model.real_token_mask
    while (x == model.mask_id).any():
        with torch.inference_mode():
            logits = model(x).logits
        for b in range(x.shape[0]):  # the per-row style this project avoids
            masked = (x[b] == model.mask_id).nonzero().flatten().tolist()
            if not masked:
                continue
            best, best_pos, best_tok = -1.0, None, None
            for i in masked:
                p = real_log_probs(logits[b, i], real).exp()
                conf, tok = p.max(-1)
                if float(conf) > best:
                    best, best_pos, best_tok = float(conf), i, int(tok)
            x[b, best_pos] = best_tok
    return x


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--length", type=int, default=81)
    ap.add_argument("--threads", type=int, default=None)
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    cfg = TransformerConfig(vocab_size=10, mask_id=9, max_length=args.length, d_model=64,
                            n_layers=2, n_heads=4, d_ff=256)
    model = TimedModel(MDMTransformer(cfg).eval())
    x = torch.full((args.batch, args.length), 9)

    rows = []
    for label, fn in (("unmask.decode (vectorised)",
                       lambda: decode(model, x, "confidence", DecodeConfig()).tokens),
                      ("per-row Python loop", lambda: per_row_decode(model, x))):
        model.seconds = 0.0
        t0 = time.perf_counter()
        out = fn()
        total = time.perf_counter() - t0
        rows.append((label, total, model.seconds, out))
    same = torch.equal(rows[0][3], rows[1][3])
    table = Table(title=f"sequential confidence decoding, batch {args.batch}, length "
                        f"{args.length}, {args.length} steps, small transformer (d=64, 2 layers)")
    for col in ("decode", "total s", "model s", "loop+sampler s", "loop share"):
        table.add_column(col, justify="right")
    for label, total, model_s, _ in rows:
        table.add_row(label, f"{total:.2f}", f"{model_s:.2f}", f"{total - model_s:.2f}",
                      f"{(total - model_s) / total:.0%}")
    console = Console()
    console.print(table)
    vec, loop = rows[0], rows[1]
    console.print(f"loop+sampler overhead ratio (per-row / vectorised): "
                  f"{(loop[1] - loop[2]) / max(1e-9, vec[1] - vec[2]):.1f}x; "
                  f"total time ratio {loop[1] / vec[1]:.1f}x; same tokens: {same}")


if __name__ == "__main__":
    main()
