"""One-way multiplication: fixed-width ``a*b=c`` sequences, a small MDM, and a benchmark of
decoding orders (a greedy sampler tends to commit the product before the factors)."""

from unmask.arithmetic.format import MASK_ID, VOCAB_SIZE, EquationFormat
from unmask.arithmetic.train import (
    TASKS,
    accuracy,
    arithmetic_model_config,
    format_of,
    task_inputs,
    training_batch,
    training_metrics,
)

__all__ = [
    "MASK_ID",
    "TASKS",
    "VOCAB_SIZE",
    "EquationFormat",
    "accuracy",
    "arithmetic_model_config",
    "format_of",
    "task_inputs",
    "training_batch",
    "training_metrics",
]
