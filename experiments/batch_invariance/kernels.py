"""Does a row's computation depend on the rows beside it, kernel by kernel, on this CPU?

For each kernel a transformer pass runs (a linear layer, scaled dot-product attention with and
without an all-ones mask, RMSNorm, softmax), at LLaDA-8B's widths, in float32 and bfloat16: is
the first row's (or first row's positions') output bitwise the same computed alone and inside
a batch of 8? And for the linear layer, with one position alone (M = 1).

    PYTHONPATH=src python experiments/batch_invariance/kernels.py [--threads 1]
"""

from __future__ import annotations

import argparse

import torch
import torch.nn.functional as F


def checks(dtype: torch.dtype, positions: int = 160, batch: int = 8) -> list[tuple[str, bool]]:
    g = torch.Generator().manual_seed(0)

    def randn(*shape):
        return torch.randn(*shape, generator=g, dtype=torch.float32).to(dtype)

    out = []
    for k, n in ((4096, 4096), (4096, 12288), (12288, 4096), (4096, 126464 // 8)):
        w = randn(n, k) / k ** 0.5
        x = randn(batch * positions, k)
        inside = F.linear(x, w)
        out.append((f"linear {k}->{n}: {positions} positions alone vs {batch * positions}",
                    torch.equal(F.linear(x[:positions], w), inside[:positions])))
        out.append((f"linear {k}->{n}: 1 position alone vs {batch * positions}",
                    torch.equal(F.linear(x[:1], w), inside[:1])))
    q, k_, v = (randn(batch, 32, positions, 128) for _ in range(3))
    both = F.scaled_dot_product_attention(q, k_, v)
    out.append(("sdpa (32 heads x 128): row alone vs batch",
                torch.equal(F.scaled_dot_product_attention(q[:1], k_[:1], v[:1]), both[:1])))
    ones = torch.ones(batch, 1, 1, positions, dtype=torch.bool)
    out.append(("sdpa: all-ones key mask vs no mask",
                torch.equal(F.scaled_dot_product_attention(q, k_, v, attn_mask=ones), both)))
    h = randn(batch, positions, 4096)
    out.append(("rms_norm 4096: row alone vs batch",
                torch.equal(F.rms_norm(h[:1], (4096,)), F.rms_norm(h, (4096,))[:1])))
    out.append(("softmax 4096 (float32): row alone vs batch",
                torch.equal(torch.softmax(h[:1].float(), -1), torch.softmax(h.float(), -1)[:1])))
    return out


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, {args.threads} thread(s)\n")
    print("| kernel | float32 | bfloat16 |\n|---|---|---|")
    rows = {dtype: checks(dtype) for dtype in (torch.float32, torch.bfloat16)}
    for (name, a), (_, b) in zip(rows[torch.float32], rows[torch.bfloat16], strict=True):
        print(f"| {name} | {'equal' if a else 'differs'} | {'equal' if b else 'differs'} |")


if __name__ == "__main__":
    main()
