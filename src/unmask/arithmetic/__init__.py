"""One-way multiplication: fixed-width ``a*b=c`` sequences, a small MDM, and a benchmark of
decoding orders (a greedy sampler tends to commit the product before the factors)."""

from unmask.lazy import lazy_exports

#: public name -> the submodule defining it (imported when the name is first read)
_EXPORTS = {
    "MASK_ID": "format",
    "VOCAB_SIZE": "format",
    "EquationFormat": "format",
    "TASKS": "train",
    "accuracy": "train",
    "arithmetic_model_config": "train",
    "format_of": "train",
    "task_inputs": "train",
    "training_batch": "train",
    "training_metrics": "train",
}
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
__all__ = ["EquationFormat", "MASK_ID", "TASKS", "VOCAB_SIZE", "accuracy",
           "arithmetic_model_config", "format_of", "task_inputs", "training_batch",
           "training_metrics"]
