"""Decodes whose tokens, NFE and sequences per row are pinned by a fixture.

Every registered sampler (default parameters) plus parameterised, verified, blocked,
corrected and self-conditioned variants, on a few hard Sudoku puzzles (shipped model), a small
protein batch at temperature 1 (shipped protein model) and arithmetic prompts (shipped
arithmetic model). ``record_decodes.py`` writes the fixture; ``test_regression_decodes.py``
re-runs every case and asserts the same results.
"""

from __future__ import annotations

import functools

import torch

ALPHABET = "0123456789abcdefghijklmnopqrstuvwxyz"
SAMPLERS = ("confidence", "eb", "entropy", "info-gain", "klass", "lookum", "margin",
            "mi-guided", "mi-oracle", "pc", "threshold", "topk", "uniform")


def _cases() -> list[dict]:
    cases = []
    for task in ("sudoku", "protein", "arithmetic"):
        for name in SAMPLERS:
            if task == "arithmetic" and name == "mi-guided":
                continue  # no shipped estimator for arithmetic
            cases.append({"task": task, "spec": name})
    cases += [
        {"task": "sudoku", "spec": "topk:k=5"},
        {"task": "sudoku", "spec": "eb:gamma=1.0,order=confidence"},
        {"task": "sudoku", "spec": "eb:gamma=1.0,order=confidence+verify=0.002"},
        {"task": "sudoku", "spec": "eb:gamma=1.0,order=confidence+verify"},
        {"task": "sudoku", "spec": "mi-guided:gamma=1.0,order=confidence+verify=0.002"},
        {"task": "sudoku", "spec": "mi-guided:gamma=0.3+verify"},
        # the rule as plain mi-guided decoded before the Sudoku estimator's recommended setting
        {"task": "sudoku", "spec": "mi-guided:gamma=0.3,order=entropy,free_max=false,"
                                   "stop_at_first_miss=false"},
        {"task": "sudoku", "spec": "topk:k=9+verify", "verify_max": 3},
        {"task": "sudoku", "spec": "threshold:tau=0.7+verify=0.01", "temperature": 0.7},
        {"task": "sudoku", "spec": "topk:k=2", "block_size": 27},
        {"task": "sudoku", "spec": "topk:k=3+verify", "block_size": 27},
        {"task": "sudoku", "spec": "confidence", "temperature": 0.5},
        {"task": "sudoku", "spec": "info-gain", "temperature": 0.5},
        {"task": "sudoku", "spec": "eb:gamma=0.1+corrector"},
        {"task": "sudoku", "spec": "topk:k=7+corrector"},
        {"task": "sudoku", "spec": "topk:k=7+corrector", "remask_threshold": 0.2,
         "max_remasks": 3, "ban_remasked": True},
        {"task": "sudoku", "spec": "info-gain+corrector"},
        {"task": "protein", "spec": "eb:gamma=1.0,order=confidence+verify=0.002"},
        {"task": "protein", "spec": "topk:k=10+verify"},
        {"task": "arithmetic", "spec": "topk:k=8+verify=0.0"},
        {"task": "arithmetic", "spec": "topk:k=8+verify"},
        {"task": "arithmetic", "spec": "confidence", "prompt": "generate", "temperature": 1.0},
        {"task": "arithmetic", "spec": "eb:gamma=0.5", "prompt": "generate",
         "temperature": 1.0},
        {"task": "selfcond", "spec": "confidence"},
        {"task": "selfcond", "spec": "topk:k=3", "temperature": 1.0},
        {"task": "selfcond", "spec": "topk:k=4+verify=0.1"},
        {"task": "selfcond", "spec": "info-gain"},
        {"task": "selfcond", "spec": "topk:k=3", "self_condition": False},
    ]
    for c in cases:
        extra = ",".join(f"{k}={c[k]}" for k in sorted(c) if k not in ("task", "spec"))
        c["id"] = f"{c['task']}/{c['spec']}" + (f"[{extra}]" if extra else "")
    return cases


CASES = _cases()


@functools.cache
def task_inputs(task: str, prompt: str = "product"):
    """(model, tokens, seed, corrector or None) of a task."""
    from unmask.models.auto import load_model

    if task == "sudoku":
        from unmask.corrector import load_corrector
        from unmask.sudoku.datasets import set_puzzles
        from unmask.sudoku.tokens import grid_to_tokens

        model = load_model("sudoku")
        return model, grid_to_tokens(set_puzzles("hard")[:4]), 0, load_corrector(model=model)
    if task == "protein":
        from unmask.protein.tokens import generation_inputs, random_lengths

        model = load_model("protein")
        return model, generation_inputs(random_lengths(4, seed=3, low=20, high=60)), 11, None
    if task == "arithmetic":
        from unmask.arithmetic.train import format_of
        from unmask.arithmetic.train import task_inputs as prompts

        model = load_model("arithmetic")
        return model, prompts(format_of(model), prompt, 8, seed=5), 3, None
    from unmask.models import MDMTransformer, TransformerConfig

    torch.manual_seed(0)
    cfg = TransformerConfig(vocab_size=6, mask_id=5, max_length=12, d_model=16, n_layers=2,
                            n_heads=2, d_ff=32, self_condition=True)
    model = MDMTransformer(cfg).eval()
    x = torch.full((3, 12), 5, dtype=torch.long)
    x[0, :3] = torch.tensor([0, 1, 2])
    x[2, 5] = 3
    return model, x, 1, None


def compact(tokens: torch.Tensor) -> list[str]:
    return ["".join(ALPHABET[t] for t in row.tolist()) for row in tokens]


def summary(res) -> dict:
    zeros = [0] * len(res.tokens)
    return {"tokens": compact(res.tokens), "nfe": res.nfe.tolist(),
            "sequences": res.sequences.tolist(), "steps": res.steps.tolist(),
            "remasked": res.stats["remasked"].tolist() if "remasked" in res.stats else zeros,
            "rejected": res.stats["rejected"].tolist() if "rejected" in res.stats else zeros,
            "cumulative_entropy": [round(v, 9) for v in res.cumulative_entropy.tolist()]}


def run_case(case: dict) -> dict:
    """Decode ``case`` with the library's API; the summary the fixture records."""
    from unmask.decode import DecodeConfig, decode
    from unmask.hooks import corrector_hooks
    from unmask.samplers import Verified, parse_spec

    model, x, seed, corrector = task_inputs(case["task"], case.get("prompt", "product"))
    spec = parse_spec(case["spec"])
    sampler = spec.build()
    if "verify_max" in case:
        sampler = Verified(sampler.inner, tolerance=sampler.tolerance,
                           max_draft=case["verify_max"])
    hooks = ()
    if spec.corrected:
        hooks = corrector_hooks(corrector, **{k: case[k] for k in (
            "max_remasks", "ban_remasked") if k in case},
            threshold=case.get("remask_threshold", 0.3))
    cfg = DecodeConfig(**{k: case[k] for k in ("temperature", "block_size", "self_condition")
                          if k in case})
    return summary(decode(model, x, sampler, cfg, seed=seed, hooks=hooks))
