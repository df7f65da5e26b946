"""How often does Fast-dLLM's block KV cache (prefix, dual) change the tokens unmask generates
on a tiny random LLaDA built from LLaDA's own code? Prints, per sampler and cache mode, the
share of generated tokens and of whole rows equal to decoding without the cache, and NFE.

    PYTHONPATH=src python experiments/kv_cache_agreement/agreement.py
"""

import random
import sys
import tempfile
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests" / "hf"))

from dllm_models import write_llada  # noqa: E402

from unmask.generate import generate  # noqa: E402
from unmask.models.auto import load_model  # noqa: E402


def main(n_prompts: int = 32, gen_length: int = 32, block: int = 8) -> None:
    torch.set_num_threads(1)
    folder = write_llada(Path(tempfile.mkdtemp()) / "llada", d_model=64, n_layers=4)
    model = load_model(folder, trust_remote_code=True)
    rng = random.Random(0)
    prompts = [" ".join(f"w{rng.randrange(3, 90)}" for _ in range(rng.randrange(4, 17)))
               for _ in range(n_prompts)]
    print(f"tiny LLaDA (d_model 64, 4 layers, vocab 96), {n_prompts} prompts of 4-16 tokens, "
          f"gen_length {gen_length}, block {block}, greedy")
    print("| sampler | cache | tokens equal | rows equal | NFE (no cache -> cache) |")
    print("|---|---|---|---|---|")
    for sampler, steps in [("confidence", gen_length // 2), ("threshold:tau=0.9", None),
                           ("threshold:tau=0.7", None), ("eb:gamma=0.1", None)]:
        kw = dict(sampler=sampler, gen_length=gen_length, block_length=block, steps=steps,
                  stop_at_eos=False)
        base = generate(model, None, prompts, **kw)
        for cache in ("prefix", "dual"):
            out = generate(model, None, prompts, cache_kv=cache, **kw)
            same = sum(a == b for r, c in zip(base, out, strict=True)
                       for a, b in zip(r.token_ids, c.token_ids, strict=True))
            rows = sum(r.token_ids == c.token_ids for r, c in zip(base, out, strict=True))
            nfe0 = sum(r.nfe for r in base) / n_prompts
            nfe1 = sum(r.nfe for r in out) / n_prompts
            print(f"| {sampler} | {cache} | {same / (n_prompts * gen_length):.3f} | "
                  f"{rows}/{n_prompts} | {nfe0:.2f} -> {nfe1:.2f} |")


if __name__ == "__main__":
    main()
