"""Side measurement for experiments/hf_throughput: wall time inside and outside the model for
unmask `confidence` and LLaDA2Pipeline top-1 (the same rule, the same tokens) at batch 32,
three rounds, on the benchmark's model (head scaled by 4) and prompts.

    PYTHONPATH=src:tests/hf python experiments/hf_throughput/model_time.py
"""

import random
import tempfile
import time
from pathlib import Path

import diffusers
import tiny_models
import torch

from unmask.generate import generate
from unmask.models.auto import load_model

torch.set_num_threads(1)
folder = tiny_models.write_llada(Path(tempfile.mkdtemp()) / "m", causal=True, seed=1)
model = load_model(folder, trust_remote_code=True)
with torch.no_grad():
    model.hf.head.weight.mul_(4)
    model.hf.head.bias.mul_(4)
rng = random.Random(32)  # the benchmark's prompts at batch 32
prompts = [" ".join(rng.choice(tiny_models.WORDS) for _ in range(8)) for _ in range(32)]
ids = torch.tensor([model.tokenizer(p)["input_ids"] for p in prompts])
inside, start = [0.0], [0.0]
model.hf.register_forward_pre_hook(lambda *a: start.__setitem__(0, time.perf_counter()))
model.hf.register_forward_hook(
    lambda *a: inside.__setitem__(0, inside[0] + time.perf_counter() - start[0]))
pipe = diffusers.LLaDA2Pipeline(model=model.hf, scheduler=diffusers.BlockRefinementScheduler(),
                                tokenizer=model.tokenizer)
pipe.set_progress_bar_config(disable=True)
runs = {
    "unmask confidence": lambda: generate(model, None, prompts, sampler="confidence",
                                          gen_length=32, block_length=8, stop_at_eos=False),
    "diffusers top-1": lambda: pipe(input_ids=ids, gen_length=32, block_length=8,
                                    use_chat_template=False, editing_threshold=None,
                                    minimal_topk=1, eos_early_stop=False,
                                    sampling_method="greedy", temperature=0.0,
                                    output_type="seq", num_inference_steps=8, threshold=1.5),
}
for _ in range(3):
    for name, run in runs.items():
        inside[0] = 0.0
        t0 = time.perf_counter()
        run()
        wall = time.perf_counter() - t0
        print(f"{name}: wall {wall:.3f} s, in the model {inside[0]:.3f} s, "
              f"outside {wall - inside[0]:.3f} s")
