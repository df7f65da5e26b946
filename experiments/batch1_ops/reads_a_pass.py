"""Host reads a pass of ``unmask.generate`` on LLaDA's own modelling code (the tiny random
checkpoint of tests/hf/dllm_models.py), counted on the accelerators' path
(``as_on_accelerators``), for prompts of one length and of two (a padded batch), by where
they are made: the loop, the model's code, unmask's hook on that code.

    PYTHONPATH=src:tests/hf python experiments/batch1_ops/reads_a_pass.py
"""

from __future__ import annotations

import collections
import tempfile
import time
from pathlib import Path

import torch
import torch._dynamo
from dllm_models import write_llada

from unmask.generate import generate
from unmask.host_reads import as_on_accelerators, count_host_reads
from unmask.models.auto import load_model

PROMPTS = {"one length": ["w5 w17 w33", "w8 w9 w10"],
           "two lengths (padded)": ["w5 w17 w33", "w8 w9 w10 w11 w12 w40"]}
SETTINGS = {"eb": dict(sampler="eb", gen_length=16, block_length=4),
            "eb, prefix cache": dict(sampler="eb", gen_length=16, block_length=4,
                                     cache_kv="prefix")}


def _where(site: str) -> str:
    name = site.split(" ")[0].rsplit("/", 1)[-1].split(":")[0]
    return {"modeling_llada.py": "model code", "hf_compat.py": "unmask's hook"}.get(name,
                                                                                    "loop")


def main() -> None:
    torch.set_num_threads(1)
    torch._dynamo.config.disable = True
    model = load_model(write_llada(Path(tempfile.mkdtemp()) / "llada"), trust_remote_code=True)
    print("| prompts | settings | passes | reads a pass: loop, model code, unmask's hook | "
          "ms a call (least of 20) |\n|---|---|---|---|---|")
    for label, prompts in PROMPTS.items():
        for name, kw in SETTINGS.items():
            with as_on_accelerators(), count_host_reads(sites=True) as reads:
                out = generate(model, None, prompts, stop_at_eos=False, **kw)
            passes = max(g.nfe for g in out)
            parts = collections.Counter()
            for site, n in reads.by_site.items():
                parts[_where(site)] += n
            walls = []
            for _ in range(20):
                t0 = time.perf_counter()
                generate(model, None, prompts, stop_at_eos=False, **kw)
                walls.append(time.perf_counter() - t0)
            print(f"| {label} | {name} | {passes} | " + ", ".join(
                f"{parts[k] / passes:.2f}" for k in ("loop", "model code", "unmask's hook"))
                + f" | {1e3 * min(walls):.2f} |")


if __name__ == "__main__":
    main()
