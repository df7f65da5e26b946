"""Training data, prompts and evaluation for the multiplication MDM.

Training samples are true equations ``a*b=c`` with factors drawn uniformly over their full
fixed-width range, each position (operators included) masked with a probability drawn
uniformly in (0, 1] per sample, so the model sees every conditional it is later asked for:
product from factors, factors from product, and everything from nothing.
"""

from __future__ import annotations

import numpy as np
import torch

from unmask.arithmetic.format import MASK_ID, VOCAB_SIZE, EquationFormat
from unmask.decode import DecodeConfig, decode
from unmask.errors import require
from unmask.models.transformer import MDMTransformer, TransformerConfig
from unmask.training.mdm import mask_batch

#: task name -> fields given in the prompt (the rest is masked)
TASKS = {
    "generate": (),             # everything masked: unconditional generation
    "product": ("a", "*", "b", "="),  # factors given: compute the product
    "factors": ("*", "=", "c"),  # product given: find factors (the hard direction)
}


def arithmetic_model_config(fmt: EquationFormat | None = None, **overrides) -> TransformerConfig:
    """The shipped multiplication architecture: 3 layers, d=64, learned positions (about 0.1M
    parameters, 0.4 MB of weights)."""
    fmt = fmt or EquationFormat()
    require(isinstance(fmt, EquationFormat), f"fmt: expected an EquationFormat (e.g. "
                                             f"EquationFormat(2, 1)), got {type(fmt).__name__}")
    base = dict(vocab_size=VOCAB_SIZE, mask_id=MASK_ID, max_length=fmt.length, d_model=64,
                n_layers=3, n_heads=4, d_ff=128, position="learned",
                task=f"multiplication-{fmt.a_digits}x{fmt.b_digits}")
    base.update(overrides)
    return TransformerConfig(**base)


def format_of(model: MDMTransformer) -> EquationFormat:
    """The equation format a multiplication model was trained on (from its config.task)."""
    task = getattr(getattr(model, "config", None), "task", None)
    require(isinstance(task, str), "model: expected a multiplication model "
                                   f"(load_model('arithmetic')), got {type(model).__name__}")
    require(task.startswith("multiplication-"),
            f"model: expected a multiplication model, got task {task!r}")
    a, b = task.removeprefix("multiplication-").split("x")
    return EquationFormat(int(a), int(b))


def random_factors(fmt: EquationFormat, n: int, rng: np.random.Generator
                   ) -> tuple[np.ndarray, np.ndarray]:
    return (rng.integers(0, 10**fmt.a_digits, n), rng.integers(0, 10**fmt.b_digits, n))


def training_batch(fmt: EquationFormat, step: int, batch_size: int, seed: int = 0
                   ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(inputs, targets, loss_mask), each (B, L), a pure function of (seed, step)."""
    rng = np.random.default_rng([seed, step])
    targets = fmt.encode(*random_factors(fmt, batch_size, rng))
    ratio = 1.0 - rng.uniform(0.0, 1.0, (batch_size, 1))  # in (0, 1]
    draw = rng.uniform(0.0, 1.0, (batch_size, fmt.length))
    inputs, loss_mask = mask_batch(targets, ratio, draw, MASK_ID)
    return inputs, targets, loss_mask


def task_inputs(fmt: EquationFormat, task: str, n: int, seed: int = 0) -> torch.Tensor:
    """(n, L) prompts for ``task`` ('generate', 'product' or 'factors'), MASK elsewhere.

    Conditional prompts come from uniformly drawn factor pairs, so every 'factors' prompt has
    at least one solution.
    """
    require(task in TASKS, f"task: expected one of {tuple(TASKS)}, got {task!r}")
    require(n >= 1, f"n: must be >= 1, got {n}")
    rng = np.random.default_rng([seed, 7919])
    full = fmt.encode(*random_factors(fmt, n, rng))
    given = fmt.field_mask(*TASKS[task])
    return full.masked_fill(~given, MASK_ID)


def accuracy(model: MDMTransformer, fmt: EquationFormat, task: str, n: int = 256,
             sampler="confidence", temperature: float = 0.0, seed: int = 0) -> float:
    """Share of ``n`` decoded prompts of ``task`` that are correct equations."""
    x = task_inputs(fmt, task, n, seed)
    res = decode(model, x, sampler, DecodeConfig(temperature=temperature), seed=seed)
    return float(fmt.correct(res.tokens).float().mean())


def training_metrics(model: MDMTransformer, fmt: EquationFormat, n: int = 256) -> dict:
    """Sequential confidence decoding in both conditional directions; 'accuracy' is their mean
    (the selection metric)."""
    forward = accuracy(model, fmt, "product", n, seed=10_000)
    backward = accuracy(model, fmt, "factors", n, seed=10_000)
    return {"accuracy": (forward + backward) / 2, "product_acc": forward,
            "factors_acc": backward}
