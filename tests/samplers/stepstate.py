"""Hand-built :class:`StepState` for sampler unit tests."""

import torch

from unmask.models.base import ModelOutput
from unmask.samplers import StepState


def hand_state(x0_prob, eligible=None, *, entropy=None, attentions=None, mask_id=9):
    """A one-step state over B rows, N positions: ``x0_prob`` (B, N) confidences; ``eligible``
    (B, N) bool (default all); every eligible position is MASK, the others hold token 0."""
    x0_prob = torch.as_tensor(x0_prob, dtype=torch.float64)
    b, n = x0_prob.shape
    eligible = torch.ones(b, n, dtype=torch.bool) if eligible is None else torch.as_tensor(
        eligible, dtype=torch.bool)
    tokens = torch.where(eligible, mask_id, 0)
    out = ModelOutput(logits=torch.zeros(b, n, mask_id + 1), hidden=torch.zeros(b, n, 1),
                      attentions=attentions)
    zeros = torch.zeros(b, dtype=torch.long)
    return StepState(
        tokens=tokens, masked=eligible.clone(), eligible=eligible, output=out,
        log_probs=torch.zeros(b, n, mask_id + 1), probs=torch.zeros(b, n, mask_id + 1),
        entropy=torch.zeros(b, n, dtype=torch.float64) if entropy is None else entropy,
        x0=torch.zeros(b, n, dtype=torch.long), x0_prob=x0_prob, step=zeros,
        global_step=zeros, block_masked=eligible.sum(1), row_ids=torch.arange(b),
        seeds=zeros, temperature=0.0, model=None, mask_id=mask_id,
        real_mask=torch.arange(mask_id + 1) != mask_id)
