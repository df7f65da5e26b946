"""Operations a pass outside the model's forward at batch 1: unmask ``generate`` against
Fast-dLLM's generate functions on benchmarks/dllm_throughput.py's tiny LLaDA (d_model 64, 2
layers, 96 ids, gen 256, block 32, a 32-token prompt, greedy), every rule and cache, with
unmask's split by the part of its loop that launched them.

    PYTHONPATH=src:tests/hf:benchmarks python experiments/batch1_ops/beside_fastdllm.py \
        [--sharpen 1.5] [--json results_fastdllm.json]

Counted with a ``TorchDispatchMode`` (every aten call, views included) over one run after an
untimed one; a pass is one call of the model's forward. The rules and reference functions
are the benchmarks' (gpu.py's, which dllm_throughput also runs).
"""

from __future__ import annotations

import argparse
import collections
import functools
import json
import random
import sys
import tempfile
from pathlib import Path

import torch
import torch._dynamo
from dllm_models import fastdllm_generate, write_llada
from gpu import REFERENCES, RULES, ModelSpans
from torch.utils._python_dispatch import TorchDispatchMode

from unmask.generate import generate
from unmask.models.auto import load_model

#: low-confidence: 64 steps in all (dllm_throughput's default); the references' per block
STEPS = {"threshold": None, "low-confidence": 64}
#: the loop's parts, by the function that launches their operations
PARTS = {"unmask.decode": ["_Loop.enter_blocks", "_Loop.columns", "_Loop.step_state",
                           "_Loop.write", "_select", "_stop_if_broken"],
         "unmask.models.handle": ["ModelHandle.__call__"],
         "unmask.models.hf": ["HFMaskedModel.forward"],
         "unmask.kv_cache": ["BlockKVCache.__call__"]}


class Counter(TorchDispatchMode):
    """aten calls by the innermost open part ("model" inside the model's forward)."""

    def __init__(self):
        super().__init__()
        self.parts, self.counts = ["other"], collections.defaultdict(collections.Counter)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.counts[self.parts[-1]][func.overloadpacket.__name__] += 1
        return func(*args, **(kwargs or {}))

    def wrap(self, owner, name: str, label: str) -> None:
        inner = getattr(owner, name)

        @functools.wraps(inner)  # keeps the signature (the cache reads the model's)
        def opened(*a, **k):
            self.parts.append(label)
            try:
                return inner(*a, **k)
            finally:
                self.parts.pop()

        setattr(owner, name, opened)


def _engines(model, prompt: str, ids: torch.Tensor, rule: str, cache: str | None) -> dict:
    """engine -> a call generating 256 tokens after ``prompt`` (``ids`` (1, 32))."""
    (spec, kw), steps = RULES[rule], STEPS[rule]
    return {
        "unmask": lambda: generate(
            model, None, [prompt], sampler=spec, gen_length=256, block_length=32,
            steps=steps, stop_at_eos=False, cache_kv=cache),
        "Fast-dLLM": lambda: getattr(fastdllm_generate(), REFERENCES[cache])(
            model.hf, ids, steps=steps or 8, gen_length=256, block_length=32,
            temperature=0.0, mask_id=model.mask_id, **kw)}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sharpen", type=float, default=1.5)
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    torch._dynamo.config.disable = True
    folder = write_llada(Path(tempfile.mkdtemp()) / "llada", d_model=64, n_layers=2,
                         vocab_size=96, mask_id=93)
    model = load_model(folder, trust_remote_code=True)
    with torch.no_grad():
        model.hf.model.transformer.ff_out.weight.mul_(args.sharpen)
    rng = random.Random(0)
    prompt = " ".join(f"w{rng.randrange(3, 90)}" for _ in range(32))
    ids = torch.tensor([model.tokenizer(prompt)["input_ids"]])
    counter = Counter()
    for module, names in PARTS.items():
        for name in names:
            owner, _, attr = name.rpartition(".")
            target = sys.modules[module] if not owner else getattr(sys.modules[module], owner)
            counter.wrap(target, attr, name)
    counter.wrap(type(model.hf), "forward", "model")
    out = {}
    print("| rule | cache | engine | passes | ops a pass outside the model | most of them |")
    print("|---|---|---|---|---|---|")
    for rule in RULES:
        for cache in REFERENCES:
            for engine, run in _engines(model, prompt, ids, rule, cache).items():
                run()
                counter.counts.clear()
                with ModelSpans(model.hf, "cpu") as spans, counter:
                    run()
                n = spans.calls
                by_part, names = {}, collections.Counter()
                for part, c in counter.counts.items():
                    if part != "model":
                        by_part[part] = sum(c.values()) / n
                        names.update(c)
                total = sum(by_part.values())
                out[f"{rule} {cache or 'none'} {engine}"] = {
                    "passes": n, "ops_per_pass": total, "by_part": by_part,
                    "by_name": {k: v / n for k, v in names.items()}}
                top = ", ".join(f"{k} {v / n:.0f}" for k, v in names.most_common(4))
                print(f"| {rule} | {cache or 'none'} | {engine} | {n} | {total:.1f} | {top} |",
                      flush=True)
    parts = out["low-confidence none unmask"]["by_part"]
    print("\nunmask, low-confidence, no cache, by part: " + ", ".join(
        f"{k} {v:.1f}" for k, v in sorted(parts.items(), key=lambda kv: -kv[1])))
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
