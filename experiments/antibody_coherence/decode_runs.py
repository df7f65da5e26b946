"""Decode unconditional AntiBERTy chains ("<mask:L>", L residues) with each sampler spec and
write one JSON file per spec (sequences, passes, sequences evaluated, wall): the raw material
of the coherence table (score_runs.py types and scores them).

    python experiments/antibody_coherence/decode_runs.py --out DIR --length 118 --chains 16 \
        --temperature 1 [--block-length 32] SPEC ...

A spec whose file exists is skipped (the run is checkpointed per spec)."""

from __future__ import annotations

import argparse
import json
import re
import time
from pathlib import Path

import torch

from unmask.infill import infill
from unmask.models.auto import load_model


def file_name(spec: str, block_length: int | None = None) -> str:
    block = f"_block{block_length}" if block_length else ""
    return re.sub(r"[^A-Za-z0-9_.=-]+", "_", spec) + block + ".json"


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--length", type=int, default=118)
    p.add_argument("--chains", type=int, default=16)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--temperature", type=float, default=1.0)
    p.add_argument("--batch-size", type=int, default=None)
    p.add_argument("--block-length", type=int, default=None,
                   help="decode in semi-autoregressive blocks of this many residues")
    p.add_argument("specs", nargs="+")
    args = p.parse_args()
    torch.set_num_threads(1)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    model = load_model("antiberty")
    templates = [f"<mask:{args.length}>"] * args.chains
    for spec in args.specs:
        path = out / file_name(spec, args.block_length)
        if path.exists():
            continue
        t0 = time.perf_counter()
        gens = infill(model, templates, sampler=spec, temperature=args.temperature,
                      seed=args.seed, batch_size=args.batch_size,
                      block_length=args.block_length)
        wall = time.perf_counter() - t0
        row = {"spec": spec, "length": args.length, "chains": args.chains, "seed": args.seed,
               "temperature": args.temperature, "wall_s": wall,
               "block_length": args.block_length,
               "texts": [g.text for g in gens], "nfe": [g.nfe for g in gens],
               "sequences": [g.sequences for g in gens]}
        path.write_text(json.dumps(row, indent=1))
        print(f"{spec}: {sum(row['nfe']) / len(gens):.1f} passes, {wall:.1f} s", flush=True)


if __name__ == "__main__":
    main()
