"""Info-Gain and LookUM with their authors' settings against confidence, entropy and margin,
on Sudoku (shipped model, hard set) and the reasoning tasks (shipped text model).

One JSON line per (task, temperature, sampler) in ``results_sudoku.jsonl`` /
``results_reasoning.jsonl``; a line already there is
skipped, so a killed run resumes. Every line: accuracy, paired wins/losses against confidence
(per-item ``correct`` string), passes (NFE), sequences, steps, sequences per committed token,
wall seconds, and for the lookahead rows the sampler's stats (bypassed steps, candidates
scored, lookahead sequences) and a diagnostic of every step: how often the winner is not the
greedy (most confident) candidate, and the spread over the evaluated candidates of the
remaining-position mean entropy Hbar(next) and of the cost C.

    OMP_NUM_THREADS=1 nice -n 10 python experiments/info_gain_authors/run.py sudoku
    OMP_NUM_THREADS=1 nice -n 10 python experiments/info_gain_authors/run.py reasoning
    python experiments/info_gain_authors/run.py table
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

import torch

from unmask.decode import DecodeConfig, decode
from unmask.models.auto import load_model
from unmask.presets import preset_spec
from unmask.samplers.lookahead import LookaheadSampler
from unmask.samplers.spec import parse_spec

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results.jsonl"  # set by main: results_<what>.jsonl
SAMPLERS = {"confidence": "confidence", "entropy": "entropy", "margin": "margin",
            "klass": "klass", "pc": "pc",
            "info-gain-authors": preset_spec("info-gain-authors"),
            "lookum-authors": preset_spec("lookum-authors"),
            "info-gain": "info-gain"}  # unmask's own defaults, the earlier rows


def commit() -> str:
    return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                          text=True, cwd=HERE).stdout.strip()


def done_keys() -> set[tuple]:
    if not RESULTS.exists():
        return set()
    return {(r["task"], r["temperature"], r["sampler"]) for r in map(json.loads,
                                                                    RESULTS.open())}


class Watch:
    """Sums a sampler's stats over the decodes it runs and, for a lookahead sampler, a
    diagnostic of each of its steps (patched onto the instance, nothing else changed)."""

    def __init__(self, sampler):
        self.sampler, self.totals = sampler, defaultdict(float)
        begin = sampler.begin

        def counting_begin(b, n):
            self.flush()
            begin(b, n)

        sampler.begin = counting_begin
        if isinstance(sampler, LookaheadSampler):
            score = sampler.score

            def watched_score(state):
                step = score(state)
                self.step(step)
                return step

            sampler.score = watched_score

    def flush(self):
        for k, v in self.sampler.stats().items():
            self.totals[k] += float(v.double().sum())
        if isinstance(self.sampler, LookaheadSampler):
            self.sampler._counts = None  # counted: the next decode starts from zero

    def step(self, step):
        t = self.totals
        searched = ~step.bypass
        t["rows_steps"] += float(step.bypass.numel())
        t["searched_steps"] += float(searched.sum())
        t["deviated"] += float((searched & (step.winner != 0)).sum())
        ev = step.evaluated & searched[:, None]
        many = ev.sum(1) >= 2
        if bool(many.any()):
            h = step.hbar_next[many]
            m = ev[many]
            spread = (h.masked_fill(~m, -torch.inf).amax(1)
                      - h.masked_fill(~m, torch.inf).amin(1))
            c = step.candidates.cost[many]
            cspread = (c.masked_fill(~m, -torch.inf).amax(1)
                       - c.masked_fill(~m, torch.inf).amin(1))
            t["spread_steps"] += float(many.sum())
            t["hnext_spread"] += float(spread.sum())
            t["cost_spread"] += float(cspread.sum())


def build(name: str):
    return parse_spec(SAMPLERS[name]).build()


def row(task, temperature, name, correct, nfe, seqs, steps, tokens, wall, watch, extra=None):
    n = len(correct)
    t = watch.totals
    out = {"task": task, "temperature": temperature, "sampler": name, "spec": SAMPLERS[name],
           "n": n, "accuracy": sum(correct) / n, "correct": "".join("1" if c else "0"
                                                                    for c in correct),
           "nfe": nfe / n, "sequences": seqs / n, "steps": steps / n,
           "tokens": tokens / n, "sequences_per_token": seqs / tokens,
           "wall_s": wall, "commit": commit()}
    if "lookahead" in t:
        out.update({"bypassed_per_row": t["bypassed"] / n,
                    "bypass_share_of_steps": t["bypassed"] / steps,
                    "candidates_per_row": t["candidates"] / n,
                    "lookahead_per_row": t["lookahead"] / n,
                    "deviated_share": t["deviated"] / max(t["searched_steps"], 1),
                    "hnext_spread": t["hnext_spread"] / max(t["spread_steps"], 1),
                    "cost_spread": t["cost_spread"] / max(t["spread_steps"], 1)})
    out.update(extra or {})
    with RESULTS.open("a") as f:
        f.write(json.dumps(out) + "\n")
    print(f"{task} T={temperature} {name}: {100 * out['accuracy']:.1f}% nfe {out['nfe']:.1f} "
          f"seqs {out['sequences']:.1f} wall {wall:.0f}s", flush=True)


def run_sudoku(limit: int, temperatures: list[float], batch: int, names: list[str]):
    """Each batch of puzzles is checkpointed to ``<results>.partial`` as it finishes, so a
    killed run of many puzzles resumes at its next batch; the row is written once all are
    done (the partial lines of that row are then no longer read)."""
    from unmask.sudoku.datasets import set_puzzles
    from unmask.sudoku.solver import is_valid_solution
    from unmask.sudoku.tokens import grid_to_tokens, tokens_to_grid

    model = load_model("sudoku")
    puzzles = set_puzzles("hard")[:limit]
    x = grid_to_tokens(puzzles)
    done = done_keys()
    partial = RESULTS.with_suffix(".partial")
    task = "sudoku" if limit == 150 else f"sudoku_{limit}"  # the first rows were 150 puzzles
    for temperature in temperatures:
        for name in names:
            if (task, temperature, name) in done:
                continue
            key = [temperature, name, limit]
            parts = {p["lo"]: p for p in map(json.loads, partial.open())
                     if p["key"] == key} if partial.exists() else {}
            for lo in range(0, limit, batch):
                if lo in parts:
                    continue
                sampler = build(name)
                watch = Watch(sampler)
                xb = x[lo:lo + batch]
                t0 = time.perf_counter()
                res = decode(model, xb, sampler, DecodeConfig(temperature=temperature),
                             seed=lo)
                wall = time.perf_counter() - t0
                watch.flush()
                parts[lo] = {"key": key, "lo": lo, "wall": wall, "totals": watch.totals,
                             "correct": is_valid_solution(tokens_to_grid(res.tokens),
                                                          puzzles[lo:lo + batch]).tolist(),
                             "nfe": int(res.nfe.sum()), "seqs": int(res.sequences.sum()),
                             "steps": int(res.steps.sum()),
                             "tokens": int((xb == model.mask_id).sum())}
                with partial.open("a") as f:
                    f.write(json.dumps(parts[lo]) + "\n")
                print(f"  {name} T={temperature} puzzles {lo}-{lo + len(xb)}: "
                      f"{sum(parts[lo]['correct'])}/{len(xb)} in {wall:.0f}s", flush=True)
            ordered = [parts[lo] for lo in sorted(parts)]
            watch = Watch(build(name))
            for p in ordered:
                for k, v in p["totals"].items():
                    watch.totals[k] += v
            row(task, temperature, name, [c for p in ordered for c in p["correct"]],
                *(sum(p[k] for p in ordered) for k in ("nfe", "seqs", "steps", "tokens",
                                                         "wall")), watch)


def run_reasoning(limit: int, temperatures: list[float], tasks: list[str], names: list[str]):
    from unmask.reasoning.bench import solve
    from unmask.reasoning.tasks import get_tasks

    model = load_model("text")
    done = done_keys()
    for task in get_tasks(tasks):
        items = task.items(limit, 0)
        for temperature in temperatures:
            for name in names:
                if (task.name, temperature, name) in done:
                    continue
                sampler = build(name)
                watch = Watch(sampler)
                t0 = time.perf_counter()
                solved = solve(model, task, items, sampler, temperature=temperature, seed=0)
                wall = time.perf_counter() - t0
                watch.flush()
                row(task.name, temperature, name, [s.correct for s in solved],
                    sum(s.nfe for s in solved), sum(s.sequences for s in solved),
                    sum(s.nfe for s in solved) if "lookahead" not in watch.totals
                    else watch.totals["rows_steps"], task.gen_length * len(items), wall,
                    watch)


def table():
    rows = [json.loads(line) for path in sorted(HERE.glob("results_*.jsonl"))
            for line in path.open()]
    conf = {(r["task"], r["temperature"]): r["correct"] for r in rows
            if r["sampler"] == "confidence"}
    print("| task | T | sampler | acc % | vs conf. | passes | seqs | seqs/token | wall s "
          "| bypass % of steps | winner not greedy % | Hbar(next) spread | C spread |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        ref = conf.get((r["task"], r["temperature"]))
        vs = ""
        if ref is not None:
            gain = sum(a == "1" and b == "0" for a, b in zip(r["correct"], ref, strict=True))
            loss = sum(a == "0" and b == "1" for a, b in zip(r["correct"], ref, strict=True))
            vs = f"+{gain}/-{loss}"
        look = "bypass_share_of_steps" in r
        extra = (f"{100 * r['bypass_share_of_steps']:.0f} | {100 * r['deviated_share']:.0f} "
                 f"| {r['hnext_spread']:.3f} | {r['cost_spread']:.3f}") if look else \
            "| | |"
        print(f"| {r['task']} | {r['temperature']} | {r['sampler']} | "
              f"{100 * r['accuracy']:.1f} | {vs} | {r['nfe']:.1f} | {r['sequences']:.1f} | "
              f"{r['sequences_per_token']:.2f} | {r['wall_s']:.0f} | {extra} |")


def paired(r, ref) -> str:
    gain = sum(a == "1" and b == "0" for a, b in zip(r["correct"], ref, strict=True))
    loss = sum(a == "0" and b == "1" for a, b in zip(r["correct"], ref, strict=True))
    return f"+{gain}/-{loss}"


def summary():
    """One line per (task, T): accuracy (passes, sequences) of every sampler, paired against
    confidence, and the three reasoning tasks pooled per temperature."""
    rows = [json.loads(line) for path in sorted(HERE.glob("results_*.jsonl"))
            for line in path.open()]
    names = [n for n in SAMPLERS if any(r["sampler"] == n for r in rows)]
    by = {(r["task"], r["temperature"], r["sampler"]): r for r in rows}
    keys = list(dict.fromkeys((r["task"], r["temperature"]) for r in rows))
    temps = sorted({t for task, t in keys if not task.startswith("sudoku")})
    for t in temps:
        keys.append(("pooled", t))
        for n in names:
            parts = [by[k] for k in ((task, t, n) for task in ("basic_arithmetic", "chain_sum",
                                                             "countdown")) if k in by]
            if len(parts) == 3:
                tot = sum(p["n"] for p in parts)
                by[("pooled", t, n)] = {
                    "correct": "".join(p["correct"] for p in parts), "n": tot,
                    "accuracy": sum(p["accuracy"] * p["n"] for p in parts) / tot,
                    "nfe": sum(p["nfe"] * p["n"] for p in parts) / tot,
                    "sequences": sum(p["sequences"] * p["n"] for p in parts) / tot}
    print("| task | T | " + " | ".join(names) + " |")
    print("|---|---|" + "---|" * len(names))
    for task, t in keys:
        ref = by.get((task, t, "confidence"))
        cells = []
        for n in names:
            r = by.get((task, t, n))
            if r is None:
                cells.append("")
                continue
            vs = f" {paired(r, ref['correct'])}" if ref is not None and n != "confidence" else ""
            cells.append(f"{100 * r['accuracy']:.1f}{vs} ({r['nfe']:.1f} / "
                         f"{r['sequences']:.1f})")
        print(f"| {task} | {t:g} | " + " | ".join(cells) + " |")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("what", choices=["sudoku", "reasoning", "table", "summary"])
    p.add_argument("--limit", type=int, default=None)
    p.add_argument("--temperatures", default=None)
    p.add_argument("--samplers", nargs="+", default=list(SAMPLERS)[:5], choices=list(SAMPLERS))
    p.add_argument("--out", default=None, help="results file (default results.jsonl here)")
    p.add_argument("--tasks", nargs="+", default=["basic_arithmetic", "chain_sum",
                                                   "countdown"])
    args = p.parse_args(argv)
    global RESULTS
    RESULTS = Path(args.out) if args.out else HERE / f"results_{args.what}.jsonl"
    torch.set_num_threads(1)
    if args.what == "table":
        return table()
    if args.what == "summary":
        return summary()
    temps = [float(t) for t in (args.temperatures or "0").split(",")]
    if args.what == "sudoku":
        run_sudoku(args.limit or 150, temps, batch=50, names=args.samplers)
    else:
        run_reasoning(args.limit or 100, temps, args.tasks, args.samplers)


if __name__ == "__main__":
    sys.exit(main())
