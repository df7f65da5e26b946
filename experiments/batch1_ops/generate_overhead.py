"""``unmask.generate``'s time and aten operations a model call outside the model at batch 1,
beside Fast-dLLM's generate functions, on the GPU script's dry-run shapes (benchmarks/gpu.py
``--dry-run``: its tiny bf16 LLaDA, gen 16, block 8, an 8-word prompt, greedy), every rule
and cache; each time the median of ``--repeats`` runs after an untimed one.

    PYTHONPATH=src:tests/hf:benchmarks python experiments/batch1_ops/generate_overhead.py \
        [--repeats 30] [--json out.json] [--profile DIR] [--parts] [--only RULE:CACHE ...]

Per model call, outside the model's forward: the median time (and the least, which
other work on a shared machine disturbs least), the aten operations (every
call, views included: beside_fastdllm.py's count) and the Python and builtin function calls
(``sys.setprofile``), each engine over one ``generate`` at batch 1 (its setup included).
``--parts`` also prints unmask's operations a call by the part of the loop that launched
them (beside_fastdllm.py's parts) and by name; ``--profile DIR`` writes a cProfile of 200
unmask runs per rule and cache to DIR.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import statistics
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import torch
import torch._dynamo

ROOT = Path(__file__).resolve().parents[2]
for extra in (ROOT / "benchmarks", ROOT / "tests" / "hf"):
    sys.path.insert(0, str(extra))

import gpu  # noqa: E402
from beside_fastdllm import PARTS, Counter  # noqa: E402


def _runs(run, model, prompts, rule, cache):
    spec, kw = gpu.RULES[rule]
    steps = run.shape["steps"] if rule == "low-confidence" else None
    ref_steps = steps or run.shape["gen"] // run.shape["block"]
    return {"unmask": lambda: gpu._unmask(run, model, prompts, spec, steps, cache),
            "Fast-dLLM": lambda: gpu._reference(run, model, prompts, kw, ref_steps, cache)}


def _measure(model, fn, repeats):
    fn()
    walls, outs, calls = [], [], 0
    for _ in range(repeats):
        with gpu.ModelSpans(model.hf, "cpu") as spans:
            t0 = time.perf_counter()
            fn()
            wall = time.perf_counter() - t0
        walls.append(wall)
        outs.append((wall - spans.seconds) / spans.calls)
        calls = spans.calls
    counter = Counter()
    counter.wrap(type(model.hf), "forward", "model")
    with gpu.ModelSpans(model.hf, "cpu") as spans, counter:
        fn()
    type(model.hf).forward = type(model.hf).forward.__wrapped__
    ops = sum(sum(c.values()) for part, c in counter.counts.items() if part != "model")
    return {"calls": calls, "wall_ms": 1e3 * statistics.median(walls),
            "outside_ms_per_call": 1e3 * statistics.median(outs),
            "outside_ms_per_call_min": 1e3 * min(outs), "wall_ms_min": 1e3 * min(walls),
            "ops_per_call": ops / spans.calls,
            "python_calls_per_call": _python_calls(model, fn) / spans.calls}


def _parts(model, fn) -> str:
    """unmask's operations a call outside the model, by part of the loop and by name."""
    import collections

    counter = Counter()
    originals = []
    for module, names in PARTS.items():
        for name in names:
            owner, _, attr = name.rpartition(".")
            target = sys.modules[module] if not owner else getattr(sys.modules[module], owner)
            originals.append((target, attr, getattr(target, attr)))
            counter.wrap(target, attr, name)
    originals.append((type(model.hf), "forward", type(model.hf).forward))
    counter.wrap(type(model.hf), "forward", "model")
    try:
        with gpu.ModelSpans(model.hf, "cpu") as spans, counter:
            fn()
    finally:
        for target, attr, value in originals:
            setattr(target, attr, value)
    n, names = spans.calls, collections.Counter()
    by_part = {k: sum(c.values()) / n for k, c in counter.counts.items() if k != "model"}
    for k, c in counter.counts.items():
        if k != "model":
            names.update(c)
    return ("  by part: " + ", ".join(f"{k} {v:.1f}" for k, v in sorted(
        by_part.items(), key=lambda kv: -kv[1])) + "\n  by name: " + ", ".join(
        f"{k} {v / n:.1f}" for k, v in names.most_common(16)))


def _python_calls(model, fn) -> int:
    """Python and builtin function calls of one ``fn()`` outside the model's forward."""
    inside, count = [0], [0]

    def enter(module, args):
        inside[0] += 1

    def leave(module, args, output):
        inside[0] -= 1

    def profile(frame, event, arg):
        if event in ("call", "c_call") and not inside[0]:
            count[0] += 1

    hooks = [model.hf.register_forward_pre_hook(enter),
             model.hf.register_forward_hook(leave, always_call=True)]
    sys.setprofile(profile)
    try:
        fn()
    finally:
        sys.setprofile(None)
        for hook in hooks:
            hook.remove()
    return count[0]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=30)
    ap.add_argument("--json")
    ap.add_argument("--profile")
    ap.add_argument("--parts", action="store_true")
    ap.add_argument("--only", nargs="+", metavar="RULE:CACHE",
                    help="these rows only (threshold:none low-confidence:dual ...)")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    torch._dynamo.config.disable = True
    run = gpu.Run(SimpleNamespace(device="cpu", dry_run=True, budget_s=1e9, sharpen=4.0,
                                  out="/dev/null"))
    model, _ = gpu._build(run, "llada")
    prompts = gpu._prompts(1, run.shape["prompt"])
    n_tok = run.shape["gen"]
    out = []
    print("| rule | cache | calls | unmask ms outside/call (median, least) | Fast-dLLM | "
          "unmask ops/call | Fast-dLLM | unmask Python calls/call | Fast-dLLM | unmask tok/s "
          "(median, best) | Fast-dLLM | ratio (median, best) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for rule in gpu.RULES:
        for cache in gpu.REFERENCES:
            if args.only and f"{rule}:{cache or 'none'}" not in args.only:
                continue
            fns = _runs(run, model, prompts, rule, cache)
            u, r = (_measure(model, fns[e], args.repeats) for e in ("unmask", "Fast-dLLM"))
            row = {"rule": rule, "cache": cache or "none", "unmask": u, "Fast-dLLM": r}
            out.append(row)
            print(f"| {rule} | {cache or 'none'} | {u['calls']}/{r['calls']} | "
                  f"{u['outside_ms_per_call']:.3f}, {u['outside_ms_per_call_min']:.3f} | "
                  f"{r['outside_ms_per_call']:.3f}, {r['outside_ms_per_call_min']:.3f} | "
                  f"{u['ops_per_call']:.1f} | {r['ops_per_call']:.1f} | "
                  f"{u['python_calls_per_call']:.0f} | {r['python_calls_per_call']:.0f} | "
                  f"{1e3 * n_tok / u['wall_ms']:.0f}, {1e3 * n_tok / u['wall_ms_min']:.0f} | "
                  f"{1e3 * n_tok / r['wall_ms']:.0f}, {1e3 * n_tok / r['wall_ms_min']:.0f} | "
                  f"{r['wall_ms'] / u['wall_ms']:.2f}x, "
                  f"{r['wall_ms_min'] / u['wall_ms_min']:.2f}x |", flush=True)
            if args.parts:
                print(_parts(model, fns["unmask"]))
            if args.profile:
                Path(args.profile).mkdir(parents=True, exist_ok=True)
                prof = cProfile.Profile()
                prof.enable()
                for _ in range(200):
                    fns["unmask"]()
                prof.disable()
                prof.dump_stats(f"{args.profile}/{rule}_{cache or 'none'}.prof")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
