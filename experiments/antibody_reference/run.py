"""Reference figures of the natural heavy chains for the antibody settings: what a decoder's
output is compared with (pseudo-perplexity under AntiBERTy, mean pairwise identity,
composition JSD between the splits), and the sizes of the three settings.

    python experiments/antibody_reference/run.py --pppl-chains 24
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import torch

from unmask.antibody import (
    SOURCE,
    cdr_infilling,
    composition_jsd,
    length_distribution,
    load_heavy_chains,
    mean_pairwise_identity,
    pseudo_perplexity,
    random_masking,
)
from unmask.models.auto import load_model

HERE = Path(__file__).parent


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--pppl-chains", type=int, default=24,
                   help="score the first N held-out chains (every 9th, for spread)")
    p.add_argument("--out", default=str(HERE / "results.json"))
    args = p.parse_args()
    torch.set_num_threads(1)
    train, held = load_heavy_chains("train"), load_heavy_chains("held_out")
    seqs = [c.sequence for c in held]
    cdr, rnd = cdr_infilling(held), random_masking(held)
    out = {"source": SOURCE, "train": len(train), "held_out": len(held),
           "held_out_species": {s: sum(c.species == s for c in held)
                                for s in sorted({c.species for c in held})},
           "held_out_lengths": length_distribution(held),
           "cdr_infilling_masked_per_chain": float(np.mean([c.masked.sum() for c in cdr])),
           "random_masking_share": float(np.mean([c.masked.mean() for c in rnd])),
           "identity_held_out": mean_pairwise_identity(seqs),
           "identity_train": mean_pairwise_identity([c.sequence for c in train]),
           "composition_jsd_train_vs_held_out": composition_jsd([c.sequence for c in train],
                                                                seqs)}
    model = load_model("antiberty")
    picked = seqs[::9][:args.pppl_chains]
    t0 = time.perf_counter()
    pppl = pseudo_perplexity(model, picked, batch_size=64)
    out["pppl_held_out"] = {"chains": len(picked), "mean": float(pppl.mean()),
                            "median": float(np.median(pppl)), "max": float(pppl.max()),
                            "seconds": round(time.perf_counter() - t0, 1),
                            "rows": int(sum(map(len, picked)))}
    Path(args.out).write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
