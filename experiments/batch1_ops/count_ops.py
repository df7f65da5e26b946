"""Top-level aten operations per pass of each sampler's decode at batch 1 with the zero-cost
model of benchmarks/loop_overhead.py (torch.profiler; operations called by other operations
are not counted again), and the most frequent ones.

    PYTHONPATH=src:benchmarks python experiments/batch1_ops/count_ops.py \
        [--labels confidence uniform ...] [--top 8] [--json results.json]
"""

from __future__ import annotations

import argparse
import collections
import json

import loop_overhead as lo
import torch
from torch.profiler import ProfilerActivity, profile

from unmask import decode

LABELS = ["confidence", "eb", "klass", "eb+verify", "threshold:tau=0.7+wino=0.9", "uniform",
          "topk:k=2+remdm=0.05"]


def ops_per_pass(model, build) -> tuple[float, dict]:
    """(top-level aten ops per pass, op name -> count per pass) of one decode at batch 1,
    after an untimed one."""
    x = lo.masked(model, 1)
    sampler, hooks = build(model)
    decode(model, x, sampler, hooks=hooks, seed=0)
    sampler, hooks = build(model)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        res = decode(model, x, sampler, hooks=hooks, seed=0)
    passes = int(res.steps.max())
    ops = [e.name for e in prof.events() if e.name.startswith("aten::") and e.cpu_parent is None]
    return len(ops) / passes, {k: v / passes for k, v in collections.Counter(ops).items()}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--labels", nargs="+", default=LABELS)
    ap.add_argument("--top", type=int, default=8)
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    model, cases = lo.FixedOutputModel(), lo.cases()
    out = {}
    print("| sampler | aten ops/pass | most frequent (per pass) |\n|---|---|---|")
    for label in args.labels:
        total, by_name = ops_per_pass(model, cases[label])
        top = sorted(by_name.items(), key=lambda kv: -kv[1])[:args.top]
        out[label] = {"ops_per_pass": total, "by_name": by_name}
        print(f"| {label} | {total:.1f} | "
              + ", ".join(f"{k.removeprefix('aten::')} {v:.0f}" for k, v in top) + " |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
