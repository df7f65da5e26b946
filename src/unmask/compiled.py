"""The model's forward under ``torch.compile`` for the duration of a decode (opt-in).

On a GPU, ``mode="reduce-overhead"`` also records CUDA graphs: a pass of a shape seen before
replays its kernels with one launch, which is what the launch-bound passes of a batch-1
decode need. Shapes must repeat for that to pay: the block pass of a dual KV cache
(``cache_kv="dual"``) has one shape per batch; without a cache or with a prefix cache the
shape changes with the block (a compile per shape, once). On a CPU the default mode is used.
Compiled passes compute what eager ones do up to the order of floating-point sums, so tokens
are the same where no two proposals are within rounding of each other.
"""

from __future__ import annotations

import contextlib

import torch

from unmask.errors import UnmaskError
from unmask.models.base import MaskedModel


def _target(model: MaskedModel) -> torch.nn.Module:
    """The module whose forward does the work: a transformers model's own (``model.hf``; the
    adapter around it reads values on the host), else the model."""
    return getattr(model, "hf", None) or model


def default_mode(model: MaskedModel) -> str | None:
    """``"reduce-overhead"`` (CUDA graphs) for a model on a GPU, else None (the default)."""
    return "reduce-overhead" if model.device.type == "cuda" else None


@contextlib.contextmanager
def compiled(model: MaskedModel, mode: str | None = None):
    """Within the block, ``model``'s forward (its transformers model's, for an adapter) runs
    compiled with ``torch.compile(mode=mode, dynamic=False)`` (mode None:
    :func:`default_mode`); restored after. Compiled code is cached by torch per function, so
    a later block reuses what an earlier one compiled."""
    if not hasattr(torch, "compile"):
        raise UnmaskError("compile: this torch has no torch.compile")
    target = _target(model)
    had_own = "forward" in vars(target)
    original = target.forward
    target.forward = torch.compile(original, mode=mode or default_mode(model), dynamic=False)
    try:
        yield model
    finally:
        if had_own:
            target.forward = original
        else:
            del target.forward
