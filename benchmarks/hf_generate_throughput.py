"""Throughput of `unmask.generate` per sampler beside diffusers' LLaDA2Pipeline, on a tiny
random LLaDA-style model written by the test helpers (block-causal, so both see the same
logits), at batch 1 and 32, in one run.

    PYTHONPATH=src:tests/hf python benchmarks/hf_generate_throughput.py [--device cuda]

Prints tokens per second and tokens per forward pass; the numbers measure the loop's
overhead on a model whose forward costs little, not a real model's speed.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import torch

from unmask.generate import generate
from unmask.models.auto import load_model


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--gen-length", type=int, default=32)
    ap.add_argument("--block-length", type=int, default=8)
    ap.add_argument("--batches", type=int, nargs="+", default=[1, 32])
    args = ap.parse_args()
    import diffusers
    import tiny_models

    folder = tiny_models.write_llada(Path(tempfile.mkdtemp()) / "m", causal=True, seed=1)
    model = load_model(folder, trust_remote_code=True, device=args.device)
    tok = model.tokenizer
    prompt = "the cat sat on the mat and the dog"
    g, blk = args.gen_length, args.block_length
    specs = ["confidence", "threshold:tau=0.9", "eb:gamma=0.1", "margin"]
    print(f"{'engine':<34} {'batch':>5} {'tokens/s':>10} {'tokens/forward':>15}")
    for b in args.batches:
        prompts = [prompt] * b
        for spec in specs:
            generate(model, tok, prompts[:1], sampler=spec, gen_length=g, block_length=blk)
            t0 = time.perf_counter()
            out = generate(model, tok, prompts, sampler=spec, gen_length=g, block_length=blk,
                           stop_at_eos=False)
            wall = time.perf_counter() - t0
            tpf = sum(o.tokens_per_forward for o in out) / b
            print(f"{'unmask ' + spec:<34} {b:>5} {b * g / wall:>10.1f} {tpf:>15.2f}")
        calls = []
        hook = model.hf.register_forward_hook(lambda *a, c=calls: c.append(1))
        pipe = diffusers.LLaDA2Pipeline(model=model.hf,
                                        scheduler=diffusers.BlockRefinementScheduler(),
                                        tokenizer=tok)
        pipe.set_progress_bar_config(disable=True)
        ids = torch.tensor([tok(prompt)["input_ids"]] * b, device=args.device)
        t0 = time.perf_counter()
        pipe(input_ids=ids, use_chat_template=False, gen_length=g, block_length=blk,
             num_inference_steps=blk, threshold=0.9, editing_threshold=None, minimal_topk=1,
             eos_early_stop=False, sampling_method="greedy", temperature=0.0,
             output_type="seq")
        wall = time.perf_counter() - t0
        hook.remove()
        print(f"{'diffusers LLaDA2 threshold 0.9':<34} {b:>5} {b * g / wall:>10.1f} "
              f"{g / len(calls):>15.2f}")


if __name__ == "__main__":
    main()
