"""Peak memory of `unmask.generate` with Fast-dLLM's block KV cache (and without one), on a
tiny random LLaDA (LLaDA's own modelling code) with a large vocabulary, for one or more
checkouts of the library side by side.

    PYTHONPATH=src:tests/hf python benchmarks/kv_cache_memory.py \\
        [--src before=/tmp/before/src --src after=src] [--batch 16] [--gen-length 256] \\
        [--block-length 32] [--vocab-size 126464] [--steps 32] [--whole-row]

Needs ``../shared/external/fast-dllm`` (LLaDA's code; not part of the project). The model
folder is written once; every run is a fresh interpreter (``PYTHONPATH`` = that checkout's
``src``) that loads it and generates once, so its peak resident memory (``ru_maxrss``) is that
run's alone. Columns: peak MB = the process's peak resident memory; decode MB = peak minus
the resident memory after loading the model (what decoding added); wall s; NFE = forward passes
per row (mean); sequences = sequences evaluated per row (mean); same = the same tokens as the
first checkout's run with that cache (and rule). ``--whole-row`` adds each checkout's run of
the rule with every position computed (``EveryPosition``).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CACHES = (None, "prefix", "dual")


def _child(spec: dict) -> None:
    """One run in this interpreter: load, generate once, print a JSON line."""
    import torch
    import torch._dynamo

    from unmask.generate import generate, parse_sampler
    from unmask.models.auto import load_model
    from unmask.samplers.wrapper import EveryPosition

    torch.set_num_threads(spec["threads"])
    torch._dynamo.config.disable = True  # LLaDA's code compiles its attention: eager here
    model = load_model(spec["folder"], trust_remote_code=True)
    sampler, steps = spec["sampler"], spec["steps"]
    if spec["whole_row"]:  # the same rule, every position computed
        sampler = parse_sampler(sampler)
        if steps:
            blocks = spec["gen_length"] // spec["block_length"]
            sampler = dataclasses.replace(sampler, steps=steps // blocks)
        sampler, steps = EveryPosition(sampler), None
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.perf_counter()
    out = generate(model, None, spec["prompts"], sampler=sampler,
                   gen_length=spec["gen_length"], block_length=spec["block_length"],
                   steps=steps, stop_at_eos=False, cache_kv=spec["cache"])
    wall = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"peak_mb": peak / 1024, "decode_mb": (peak - before) / 1024,
                      "wall_s": wall, "nfe": [g.nfe for g in out],
                      "sequences": [g.sequences for g in out],
                      "tokens": [g.token_ids for g in out]}))


def _run(src: str, spec: dict) -> dict:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(Path(src).resolve()),
                                                       os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run([sys.executable, __file__, "--child", json.dumps(spec)], env=env,
                          capture_output=True, text=True, check=False)
    if proc.returncode:
        raise SystemExit(f"run failed ({src}, cache {spec['cache']}):\n{proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _args(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--src", action="append", metavar="LABEL=DIR",
                    help="a checkout's src folder to run (repeat; default: this=src)")
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--gen-length", type=int, default=256)
    ap.add_argument("--block-length", type=int, default=32)
    ap.add_argument("--steps", type=int, default=32, help="low-confidence steps in total")
    ap.add_argument("--sampler", default="confidence")
    ap.add_argument("--vocab-size", type=int, default=126464,
                    help="LLaDA's 126,464 by default")
    ap.add_argument("--d-model", type=int, default=64)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--caches", nargs="+", default=["none", "prefix", "dual"],
                    choices=["none", "prefix", "dual"])
    ap.add_argument("--whole-row", action="store_true")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    return ap.parse_args(argv)


def main(argv=None) -> None:
    args = _args(argv)
    if args.child:
        _child(json.loads(args.child))
        return
    from dllm_models import write_llada

    srcs = [s.split("=", 1) for s in (args.src or ["this=src"])]
    folder = write_llada(Path(tempfile.mkdtemp()) / "llada", d_model=args.d_model,
                         n_layers=args.layers, vocab_size=args.vocab_size,
                         mask_id=args.vocab_size - 3)
    rng = random.Random(0)
    prompts = [" ".join(f"w{rng.randrange(3, 90)}" for _ in range(args.block_length))
               for _ in range(args.batch)]
    n = args.block_length + args.gen_length
    print(f"tiny LLaDA (d_model {args.d_model}, {args.layers} layers, vocab {args.vocab_size}),"
          f" batch {args.batch}, N {n} (prompt {args.block_length} + gen {args.gen_length}), "
          f"block {args.block_length}, {args.sampler}, {args.threads} thread(s); "
          f"(B, N, V) float32 = {args.batch * n * args.vocab_size * 4 / 2**20:,.0f} MB")
    print("| cache | checkout | rule | peak MB | decode MB | wall s | NFE | sequences | same |")
    print("|---|---|---|---|---|---|---|---|---|")
    for cache in [None if c == "none" else c for c in args.caches]:
        first = None
        for label, src in srcs:
            for whole in (False, True)[:1 + args.whole_row]:
                spec = dict(folder=str(folder), prompts=prompts, sampler=args.sampler,
                            steps=args.steps, gen_length=args.gen_length,
                            block_length=args.block_length, cache=cache,
                            threads=args.threads, whole_row=whole)
                r = _run(src, spec)
                first = first or r
                print(f"| {cache or 'none'} | {label} | {'whole row' if whole else 'narrow'} | "
                      f"{r['peak_mb']:,.0f} | {r['decode_mb']:,.0f} | {r['wall_s']:.1f} | "
                      f"{sum(r['nfe']) / len(r['nfe']):.1f} | "
                      f"{sum(r['sequences']) / len(r['sequences']):.1f} | "
                      f"{'yes' if r['tokens'] == first['tokens'] else 'no'} |", flush=True)


if __name__ == "__main__":
    main()
