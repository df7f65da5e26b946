"""Wall-clock of decoding rules on the shipped Sudoku model, against sequential decoding.

Decodes the first ``--limit`` puzzles of a test set with sequential confidence decoding and
each rule, in batches of ``--batch`` rows, and prints, side by side: accuracy, mean forward
passes (NFE), sequences evaluated per row, tokens per pass, wall-clock, wall-clock per solved
puzzle, and each against sequential decoding's; then the wall-clock of one pass of each
rule (its wall-clock over its total passes) against one plain model call on the same batch.

The rules take turns batch by batch (each batch decoded by every rule before the next), and
with ``--rounds R`` the whole set is decoded R times: a rule's wall-clock is its median over
the rounds and ``wall/seq lo-hi`` the range of its round-by-round ratio to sequential
decoding, so a shared machine's changing load shows as a spread rather than a bias.

    python benchmarks/wallclock.py [--set hard] [--limit 200] [--batch 256] [--threads 1]
        [--rules NAME ...] [--rounds 1] [--json OUT.json]

A rule is a sampler spec (``unmask.samplers.spec``) or one of the named rules below
(verified rules with a prefix scheme the spec syntax does not carry).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch

from unmask.bench.contract import BenchRow
from unmask.bench.rows import add_rate_metrics, aup
from unmask.bench.table import render_table
from unmask.decode import DecodeConfig, decode
from unmask.models.auto import load_model
from unmask.samplers import make_sampler
from unmask.samplers.spec import parse_spec
from unmask.samplers.verified import Verified
from unmask.sudoku.datasets import set_puzzles
from unmask.sudoku.solver import is_valid_solution
from unmask.sudoku.tokens import grid_to_tokens, tokens_to_grid


def _verified(name: str, tolerance: float, prefixes: str, max_draft=None, **params):
    return lambda: Verified(make_sampler(name, **params), tolerance=tolerance,
                            prefixes=prefixes, max_draft=max_draft)


#: named rules: label -> a builder of the sampler
NAMED = {
    "eb1+verify=0.002 doubling": _verified("eb", 0.002, "doubling", gamma=1.0,
                                           order="confidence"),
    "eb1+verify=0.01 doubling": _verified("eb", 0.01, "doubling", gamma=1.0,
                                          order="confidence"),
    "eb1+verify=0.03 doubling": _verified("eb", 0.03, "doubling", gamma=1.0,
                                          order="confidence"),
    "eb1+verify=0.1 doubling": _verified("eb", 0.1, "doubling", gamma=1.0,
                                         order="confidence"),
    "eb1+verify doubling": _verified("eb", 1.0, "doubling", gamma=1.0, order="confidence"),
    "topk7+verify=0.01 doubling": _verified("topk", 0.01, "doubling", k=7),
}

DEFAULT_RULES = ["confidence", "eb:gamma=1.0,order=confidence+verify=0.002",
                 "eb1+verify=0.002 doubling", "eb1+verify=0.01 doubling",
                 "eb1+verify=0.03 doubling", "eb1+verify doubling",
                 "topk:k=7", "eb:gamma=0.1,order=confidence", "info-gain",
                 "info-gain:keep=2", "info-gain:prune=0.05,keep=2"]


def build(rule: str):
    return NAMED[rule]() if rule in NAMED else parse_spec(rule).build()


def run_interleaved(model, x, puzzles, rules: list[str], batch: int, rounds: int
                    ) -> list[BenchRow]:
    """Decode every batch with every rule in turn (the order rotated from batch to batch),
    ``rounds`` times over, so that a change of the machine's load falls on all rules alike.
    A rule's ``wall_s`` is its median total over the rounds; ``wall_s_rounds`` lists them."""
    samplers = {rule: build(rule) for rule in rules}
    walls = {rule: [0.0] * rounds for rule in rules}
    parts: dict[str, list] = {rule: [] for rule in rules}
    for r in range(rounds):
        for j, i in enumerate(range(0, len(x), batch)):
            shift = (j + r) % len(rules)
            for rule in rules[shift:] + rules[:shift]:
                start = time.perf_counter()
                res = decode(model, x[i:i + batch], samplers[rule], DecodeConfig(), seed=i)
                walls[rule][r] += time.perf_counter() - start
                if r == 0:
                    parts[rule].append(res)
    return [_row(rule, parts[rule], x, puzzles, model, walls[rule]) for rule in rules]


def _row(rule: str, parts: list, x, puzzles, model, walls: list[float]) -> BenchRow:
    tokens = torch.cat([p.tokens for p in parts])
    nfe = torch.cat([p.nfe for p in parts]).double()
    seqs = torch.cat([p.sequences for p in parts]).double()
    solved = is_valid_solution(tokens_to_grid(tokens), puzzles)
    blanks = float((x == model.mask_id).sum(1).double().mean())
    return BenchRow(rule, rule.split(":")[0], float(solved.mean()), nfe=float(nfe.mean()),
                    sequences=float(seqs.mean()), wall_s=statistics.median(walls),
                    n_items=len(puzzles),
                    columns={"solved": float(solved.mean()), "revealed": blanks,
                             "wall_s_rounds": walls, "passes_total": float(nfe.sum()),
                             "n_solved": int(solved.sum()),
                             "solved_each": "".join("1" if v else "0" for v in solved)})


def plain_pass_seconds(model, x, batch: int, repeats: int = 5) -> float:
    """Seconds of one model call on a (batch, 81) state (median of ``repeats``)."""
    xs = x[:batch]
    times = []
    with torch.inference_mode():
        for _ in range(repeats):
            t0 = time.perf_counter()
            model(xs)
            times.append(time.perf_counter() - t0)
    return sorted(times)[len(times) // 2]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--set", default="hard")
    ap.add_argument("--limit", type=int, default=200)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rules", nargs="+", default=DEFAULT_RULES)
    ap.add_argument("--rounds", type=int, default=1,
                    help="times every batch is decoded by every rule (median wall-clock)")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    model = load_model("sudoku", task="sudoku")
    model.autocast_bf16 = False
    puzzles = set_puzzles(args.set)[:args.limit]
    x = grid_to_tokens(puzzles)
    decode(model, x[:2], "topk")  # warm-up
    plain = plain_pass_seconds(model, x, args.batch)
    rows = run_interleaved(model, x, puzzles, args.rules, args.batch, args.rounds)
    add_rate_metrics(rows)
    score = aup(rows)
    rows = [r.to_dict() for r in rows]
    seq = next((r for r in rows if r["label"] == "confidence"), None)
    for r in rows:
        r["wall_vs_sequential"] = r["wall_s"] / seq["wall_s"] if seq else None
        # the ratio round by round (both rules timed on the same batches, side by side)
        r["wall_vs_sequential_rounds"] = ([a / b for a, b in zip(r["wall_s_rounds"],
                                                                 seq["wall_s_rounds"], strict=True)]
                                          if seq else None)
        ratios = r["wall_vs_sequential_rounds"] or [float("nan")]
        r["wall_vs_sequential_range"] = f"{min(ratios):.3f}-{max(ratios):.3f}"
        r["nfe_vs_sequential"] = r["nfe"] / seq["nfe"] if seq else None
        # one pass of the rule: its wall-clock spread over its batched passes
        batches = -(-r["n_items"] // args.batch)
        r["pass_s"] = r["wall_s"] / max(r["passes_total"] / r["n_items"] * batches, 1e-9)
        r["pass_vs_plain"] = r["pass_s"] / plain
    render_table(rows, [("rule", "label", ""), ("solved", "solved", ".3f"),
                        ("NFE", "nfe", ".1f"), ("seq/row", "sequences", ".1f"),
                        ("tok/pass", "tokens_per_pass", ".2f"), ("wall s", "wall_s", ".1f"),
                        ("s/solved", "wall_per_solved", ".3f"),
                        ("NFE/seq", "nfe_vs_sequential", ".3f"),
                        ("wall/seq", "wall_vs_sequential", ".3f"),
                        ("wall/seq lo-hi", "wall_vs_sequential_range", ""),
                        ("pass/plain", "pass_vs_plain", ".2f")],
                 title=f"{args.set}, {len(puzzles)} puzzles, batch {args.batch}, "
                       f"{args.threads} thread(s); plain pass {plain * 1e3:.1f} ms")
    print(f"AUP over these rows: {score:.2f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"set": args.set, "limit": args.limit, "batch": args.batch,
                       "rounds": args.rounds,
                       "threads": args.threads, "plain_pass_s": plain, "rows": rows}, f,
                      indent=1)


if __name__ == "__main__":
    main()
