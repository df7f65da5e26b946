"""Would a fused (compiled) pass state pay at batch 1 on the CPU? The loop's per-pass state
(log-softmax over the real tokens, probabilities, entropy at masked positions, the argmax
proposal and its probability) on the GPU script's dry-run shape (1, 8, 96) in bfloat16, timed
eagerly (outside and inside ``torch.inference_mode``), under ``torch.compile`` (inductor,
``dynamic=False``) and compiled ahead of time (AOTInductor, no guards to evaluate a call).

    PYTHONPATH=src python experiments/batch1_ops/fused_state.py [--calls 1000] [--json out]

Prints microseconds a call (the least of 5 rounds of ``--calls`` calls, after 50 untimed),
the compile seconds, and whether each compiled output equals the eager one bit for bit.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import torch

from unmask.probs import real_log_probs


def state(logits: torch.Tensor, real_mask: torch.Tensor, masked: torch.Tensor):
    """The loop's state of a pass at temperature 0 (:meth:`unmask.decode._Loop.step_state`):
    (log_probs, probs, entropy, x0, x0_prob)."""
    log_probs = real_log_probs(logits, real_mask)
    probs = log_probs.exp()
    entropy = torch.where(masked, torch.special.entr(probs).sum(-1), 0.0)
    x0 = log_probs.argmax(-1)
    x0_prob = probs.gather(-1, x0[..., None]).squeeze(-1)
    return log_probs, probs, entropy, x0, x0_prob


class _State(torch.nn.Module):
    def forward(self, logits, real_mask, masked):
        return state(logits, real_mask, masked)


def _us(fn, args, calls: int) -> float:
    for _ in range(50):
        fn(*args)
    best = float("inf")
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn(*args)
        best = min(best, (time.perf_counter() - t0) / calls)
    return 1e6 * best


def _equal(fn, args) -> bool:
    want, got = state(*args), fn(*args)
    return all(torch.equal(a, b) for a, b in zip(want, got, strict=True))


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=1000)
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    gen = torch.Generator().manual_seed(0)
    logits = torch.randn(1, 8, 96, generator=gen).to(torch.bfloat16)
    real_mask = torch.ones(96, dtype=torch.bool)
    real_mask[93] = False  # the dry run's MASK id
    masked = torch.ones(1, 8, dtype=torch.bool)
    inputs = (logits, real_mask, masked)
    rows = {"eager": {"us": _us(state, inputs, args.calls)}}
    with torch.inference_mode():
        rows["eager, inference mode"] = {"us": _us(state, inputs, args.calls)}
    t0 = time.perf_counter()
    compiled = torch.compile(state, dynamic=False)
    compiled(*inputs)
    rows["torch.compile"] = {"compile_s": time.perf_counter() - t0,
                             "us": _us(compiled, inputs, args.calls),
                             "bit_equal": _equal(compiled, inputs)}
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        program = torch.export.export(_State(), inputs)
        path = torch._inductor.aoti_compile_and_package(program,
                                                        package_path=f"{tmp}/state.pt2")
        aot = torch._inductor.aoti_load_package(path)
        aot(*inputs)
        rows["AOTInductor"] = {"compile_s": time.perf_counter() - t0,
                               "us": _us(aot, inputs, args.calls),
                               "bit_equal": _equal(aot, inputs)}
    print("| how | us a call | compile s | bit for bit as eager |\n|---|---|---|---|")
    for name, r in rows.items():
        print(f"| {name} | {r['us']:.1f} | {r.get('compile_s', 0):.1f} | "
              f"{r.get('bit_equal', True)} |")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
