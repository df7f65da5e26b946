"""What a pass of MI-guided decoding costs against a pass of EB-Sampler, on the shipped
Sudoku model (CPU).

MI-guided decoding reads its estimator from the hidden states of the loop's own pass and
selects without reading anything back, so a pass should cost about what an EB pass costs.
For each batch size this decodes the first puzzles of the hard set with EB-Sampler (``--eb``)
and MI-guided decoding (``--mi``; plain ``mi-guided`` uses the shipped estimator's
recommended setting) and prints, side by side: loop passes, sequences evaluated (the rows'
passes summed), wall-clock, wall-clock per sequence evaluated (at batch 1, per pass) and
its ratio to EB's, and the host reads per loop pass (calls of Tensor.item, tolist, numpy,
__bool__, __int__, __float__ and __index__ during the decode, counted in a separate untimed
decode of at most 32 puzzles) beside sequential confidence decoding's.

At batch 1 the ``--limit1`` puzzles are decoded one at a time, the rules taking turns
puzzle by puzzle (the order flipped every puzzle), so a shared machine's changing load
falls on both; at larger batches the rules take turns ``--rounds`` times over one batch.

    python benchmarks/mi_guided_cost.py [--batches 1 1000] [--limit1 30] [--rounds 1]
        [--threads 1] [--mi mi-guided] [--eb eb:gamma=0.01,order=confidence] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import time

import torch

from unmask.decode import decode
from unmask.models.auto import load_model
from unmask.samplers.spec import parse_spec
from unmask.sudoku.datasets import set_puzzles
from unmask.sudoku.tokens import grid_to_tokens

READS = ("item", "tolist", "numpy", "__bool__", "__int__", "__float__", "__index__")


def host_reads(model, tokens: torch.Tensor, spec: str) -> tuple[int, int]:
    """(host reads, loop passes) of one decode of ``tokens`` with ``spec``, one puzzle at a
    time when ``tokens`` has one row per decode wanted (batch 1) else as one batch."""
    count = [0]
    saved = {name: getattr(torch.Tensor, name) for name in READS}

    def counting(method):
        def wrapped(*args, **kwargs):
            count[0] += 1
            return method(*args, **kwargs)
        return wrapped

    for name in READS:
        setattr(torch.Tensor, name, counting(saved[name]))
    try:
        res = decode(model, tokens, parse_spec(spec).build())
    finally:
        for name, method in saved.items():
            setattr(torch.Tensor, name, method)
    return count[0], int(res.steps.max())


def timed(model, tokens: torch.Tensor, spec: str) -> dict:
    """Wall-clock, loop passes and sequences evaluated of one decode (a fresh sampler, as a
    user's call builds one)."""
    start = time.perf_counter()
    res = decode(model, tokens, parse_spec(spec).build())
    wall = time.perf_counter() - start
    return {"wall": wall, "passes": int(res.steps.max()), "sequences": int(res.sequences.sum())}


def add(total: dict, part: dict) -> None:
    for key, value in part.items():
        total[key] = total.get(key, 0) + value


def measure(model, puzzles: torch.Tensor, batch: int, specs: list[str], rounds: int,
            limit1: int) -> dict[str, dict]:
    """Totals per spec at one batch size, the specs taking turns (see the module doc)."""
    totals = {spec: {} for spec in specs}
    if batch == 1:
        turns = [(puzzles[p:p + 1], p) for p in range(limit1)]
    else:
        turns = [(puzzles[:batch], r) for r in range(rounds)]
    for tokens, k in turns:
        for spec in (specs if k % 2 == 0 else specs[::-1]):
            add(totals[spec], timed(model, tokens, spec))
    return totals


def reads_per_pass(model, puzzles: torch.Tensor, batch: int, spec: str) -> float:
    """Host reads per loop pass: at batch 1 over 5 single-puzzle decodes, else over one
    decode of min(batch, 32) puzzles."""
    chunks = [puzzles[p:p + 1] for p in range(5)] if batch == 1 else [puzzles[:min(batch, 32)]]
    reads = passes = 0
    for tokens in chunks:
        r, p = host_reads(model, tokens, spec)
        reads, passes = reads + r, passes + p
    return reads / passes


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--batches", type=int, nargs="+", default=[1, 1000])
    ap.add_argument("--limit1", type=int, default=30, help="puzzles decoded at batch 1")
    ap.add_argument("--rounds", type=int, default=1, help="turns per rule at larger batches")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--mi", default="mi-guided")
    ap.add_argument("--eb", default="eb:gamma=0.01,order=confidence")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    model = load_model("sudoku")
    puzzles = grid_to_tokens(set_puzzles("hard"))
    specs = [args.eb, args.mi]
    for spec in specs + ["confidence"]:  # one-off set-up (estimator read, fingerprint)
        decode(model, puzzles[:2], parse_spec(spec).build())
    out = []
    print(f"shipped Sudoku model, hard set, CPU, {args.threads} thread(s)")
    print(f"{'batch':>5}  {'rule':<34} {'passes':>6} {'seqs':>7} {'wall s':>8} "
          f"{'ms/seq':>8} {'vs EB':>6} {'reads/pass':>10}")
    for batch in args.batches:
        totals = measure(model, puzzles, batch, specs, args.rounds, args.limit1)
        conf_reads = reads_per_pass(model, puzzles, batch, "confidence")
        eb_cost = totals[args.eb]["wall"] / totals[args.eb]["sequences"]
        for spec in specs:
            t = totals[spec]
            cost = t["wall"] / t["sequences"]
            row = {"batch": batch, "rule": spec, **t, "ms_per_sequence": 1000 * cost,
                   "vs_eb": cost / eb_cost,
                   "reads_per_pass": reads_per_pass(model, puzzles, batch, spec)}
            out.append(row)
            print(f"{batch:>5}  {spec:<34} {t['passes']:>6} {t['sequences']:>7} "
                  f"{t['wall']:>8.2f} {row['ms_per_sequence']:>8.2f} {row['vs_eb']:>6.3f} "
                  f"{row['reads_per_pass']:>10.2f}")
        print(f"{batch:>5}  {'confidence (host reads only)':<34} {'':>6} {'':>7} {'':>8} "
              f"{'':>8} {'':>6} {conf_reads:>10.2f}")
        out.append({"batch": batch, "rule": "confidence", "reads_per_pass": conf_reads})
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"threads": args.threads, "rows": out}, f, indent=1)


if __name__ == "__main__":
    main()
