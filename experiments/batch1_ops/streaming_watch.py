"""What the server's streaming hook (``unmask.serve.decoding.BlockWatch``) costs a decode
pass: host reads and time a pass, beside the same decode without it, on the zero-cost model
of benchmarks/loop_overhead.py (32 positions, blocks of 8, confidence, one thread).

    PYTHONPATH=src python experiments/batch1_ops/streaming_watch.py [--batch 2] [--repeats 200]
"""

from __future__ import annotations

import argparse
import time

import torch

from unmask import DecodeConfig, decode
from unmask.host_reads import count_host_reads
from unmask.models.toy import FixedOutputModel
from unmask.serve.decoding import BlockWatch


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=200)
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    model = FixedOutputModel(n=32, v=9, seed=3)
    x = torch.full((args.batch, model.n), model.mask_id, dtype=torch.long)
    config = DecodeConfig(block_size=8)
    cases = {"no hook": lambda: (),
             "streaming row 0": lambda: (BlockWatch([0], 0, 8, lambda row, ids: None),)}
    print("| decode | host reads a pass | ms a pass (least of 5 runs) |\n|---|---|---|")
    for name, hooks in cases.items():
        with count_host_reads() as reads:
            res = decode(model, x, "confidence", config, hooks=hooks())
        passes = int(res.steps.max())
        runs = []
        for _ in range(5):
            t0 = time.perf_counter()
            for _ in range(args.repeats // 5):
                decode(model, x, "confidence", config, hooks=hooks())
            runs.append((time.perf_counter() - t0) / (args.repeats // 5) / passes)
        print(f"| {name} | {reads.total / passes:.2f} | {1e3 * min(runs):.3f} |")


if __name__ == "__main__":
    main()
