"""MI label generation on the local engine against Ray with 1 and 2 workers.

The same label set (task, seed, shard size, eps) is written once per engine into a fresh
folder; the table gives wall-clock time (including Ray start-up and each worker's model load),
the start-up alone, contexts/s over the whole run and after start-up, sequences/s, sequences
evaluated, and the ratio of contexts/s against the local engine. Every folder must be
byte-identical to the local one. Each worker (and the local run) uses ``--threads`` torch
threads.

    PYTHONPATH=src .venv/bin/python benchmarks/label_engine.py --contexts 96 --shard-size 8
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import torch
from engine_timing import Timed

from unmask.bench.recipe import ModelRecipe, model_recipe, write_labels
from unmask.mi.label_files import read_labels
from unmask.parallel.workers import Engine, LocalEngine, RayEngine


def run(engine: Engine, loader: ModelRecipe, out: Path, args) -> dict:
    timed = Timed(engine)
    t0 = time.perf_counter()
    write_labels(loader, out, contexts=args.contexts, task=args.task, seed=args.seed,
                 eps=args.eps, shard_size=args.shard_size, batch_size=args.batch_size,
                 engine=timed)
    wall = time.perf_counter() - t0
    tensors, _ = read_labels(out)
    return {"wall": wall, "open": timed.open_seconds,
            "sequences": int(tensors["sequences"].sum())}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default=None, help="model (default: the task's shipped model)")
    p.add_argument("--task", default="sudoku")
    p.add_argument("--contexts", type=int, default=96)
    p.add_argument("--shard-size", type=int, default=8)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--eps", type=float, default=1e-3)
    p.add_argument("--batch-size", type=int, default=4096)
    p.add_argument("--threads", type=int, default=1, help="torch threads per worker")
    p.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    args = p.parse_args()

    torch.set_num_threads(args.threads)
    loader = model_recipe(args.task, args.model)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        rows.append(("local", 1, run(LocalEngine(), loader, root / "local", args)))
        for n in args.workers:
            engine = RayEngine(n, cpus_per_worker=args.threads)
            rows.append(("ray", n, run(engine, loader, root / f"ray{n}", args)))
            for f in sorted((root / "local").iterdir()):
                assert f.read_bytes() == (root / f"ray{n}" / f.name).read_bytes(), f.name
    print(f"{args.contexts} {args.task} contexts, shards of {args.shard_size}, eps "
          f"{args.eps}, {args.threads} thread(s) per worker, {os.cpu_count()} CPUs, load "
          f"average {os.getloadavg()[0]:.1f}; every folder byte-identical to local")
    print("| engine | workers | wall s | start-up s | contexts/s | contexts/s after start-up "
          "| sequences/s | sequences | ratio vs local |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    base = args.contexts / rows[0][2]["wall"]
    for name, n, r in rows:
        rate = args.contexts / r["wall"]
        steady = args.contexts / max(r["wall"] - r["open"], 1e-9)
        print(f"| {name} | {n} | {r['wall']:.1f} | {r['open']:.1f} | {rate:.2f} | {steady:.2f} | "
              f"{r['sequences'] / r['wall']:,.0f} | {r['sequences']:,} | {rate / base:.2f} |")


if __name__ == "__main__":
    main()
