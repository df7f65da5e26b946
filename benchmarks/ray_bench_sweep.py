"""A Sudoku bench sweep on the local engine against Ray with 1 and 2 workers.

The same sweep (samplers x puzzles, shards of ``--batch-size`` puzzles per sampler) runs once
per engine; the table gives wall-clock time of the whole sweep (including Ray start-up and each
worker's model load and warm-up), the start-up alone, the sweep after start-up, the summed
decode seconds of the shards (the rows' ``wall_s``) and the ratio of wall time against the local
engine. Every engine's rows must equal the local ones but for wall-clock fields. Each worker
(and the local run) uses ``--threads`` torch threads.

    PYTHONPATH=src .venv/bin/python benchmarks/ray_bench_sweep.py --puzzles 40 --batch-size 10
"""

from __future__ import annotations

import argparse
import os
import time

import torch
from engine_timing import Timed

from unmask.bench.recipe import ModelRecipe
from unmask.models.auto import load_model
from unmask.parallel.workers import LocalEngine, RayEngine
from unmask.samplers.spec import SamplerSpec
from unmask.sudoku.bench import run_bench as bench_sudoku
from unmask.sudoku.datasets import set_puzzles

WALL = {"wall_s", "puzzles_per_s", "wall_per_solved"}
SPECS = ["confidence", "topk:k=5", "eb:gamma=0.1,order=confidence",
         "mi-guided:gamma=0.3,order=confidence"]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="sudoku")
    p.add_argument("--set", default="hard")
    p.add_argument("--puzzles", type=int, default=40)
    p.add_argument("--batch-size", type=int, default=10)
    p.add_argument("--samplers", nargs="+", default=SPECS)
    p.add_argument("--threads", type=int, default=1, help="torch threads per worker")
    p.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    args = p.parse_args()

    torch.set_num_threads(args.threads)
    model = load_model(args.model, task="sudoku")
    recipe = ModelRecipe(args.model, task="sudoku", bf16=model.autocast_bf16)
    puzzles = set_puzzles(args.set)[:args.puzzles]
    entries = [SamplerSpec.parse(s) for s in args.samplers]
    shards = len(entries) * -(-len(puzzles) // args.batch_size)
    runs = []
    engines = [LocalEngine()] + [RayEngine(n, cpus_per_worker=args.threads)
                                 for n in args.workers]
    for engine in engines:
        timed = Timed(engine)
        t0 = time.perf_counter()
        rows = [r.to_dict() for r in bench_sudoku(model, puzzles, entries,
                                                  batch_size=args.batch_size, engine=timed,
                                                  recipe=recipe)]
        runs.append((engine, time.perf_counter() - t0, timed.open_seconds, rows))
    reference = [{k: v for k, v in r.items() if k not in WALL} for r in runs[0][3]]
    same = all([{k: v for k, v in r.items() if k not in WALL} for r in rows] == reference
               for *_, rows in runs)
    load = os.getloadavg()[0]
    print(f"{len(puzzles)} '{args.set}' puzzles x {len(entries)} samplers = {shards} shards of "
          f"<= {args.batch_size} puzzles, {args.threads} thread(s) per worker, "
          f"{os.cpu_count()} CPUs, load average {load:.1f}; rows equal to local but for "
          f"wall-clock fields: {'yes' if same else 'NO'}\n")
    print("| engine | workers | wall s | start-up s | after start-up s | decode s (sum) "
          "| ratio vs local |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    base = runs[0][1]
    for engine, wall, start, rows in runs:
        decode_s = sum(r["wall_s"] for r in rows)
        print(f"| {engine.name} | {engine.workers} | {wall:.1f} | {start:.1f} | "
              f"{wall - start:.1f} | {decode_s:.1f} | {base / wall:.2f} |")


if __name__ == "__main__":
    main()
