"""Probability helpers shared by the decode loop, the samplers, probing and training.

A leaf module: it imports nothing from :mod:`unmask`.
"""

from __future__ import annotations

import torch


def real_log_probs(logits: torch.Tensor, real_mask: torch.Tensor) -> torch.Tensor:
    """Log-softmax over the real tokens only.

    Args:
        logits: (..., V) model logits.
        real_mask: (V,) bool, the real (decodable) token ids.

    Returns:
        (..., V) log-probabilities, -inf outside ``real_mask``; at least float32.
    """
    dtype = torch.float64 if logits.dtype == torch.float64 else torch.float32
    return torch.log_softmax(torch.where(real_mask, logits.to(dtype), -torch.inf), dim=-1)


def previous_pass_probs(probs: torch.Tensor, still_masked: torch.Tensor) -> torch.Tensor:
    """What a self-conditioning model reads of the previous pass.

    Args:
        probs: (B, N, V) the pass's distributions over the real tokens.
        still_masked: (B, N) bool, positions still MASK after the pass.

    Returns:
        (B, N, V) ``probs`` at the positions still masked, zeros elsewhere (revealed positions
        carry their token instead).
    """
    return torch.where(still_masked[..., None], probs, 0.0)


def propose(log_probs: torch.Tensor, temperature: float, noise: torch.Tensor | None
            ) -> torch.Tensor:
    """The loop's proposal per position.

    Args:
        log_probs: (..., N, V) log-probabilities.
        temperature: 0 takes the argmax; > 0 the argmax of ``log_probs / temperature + noise``.
        noise: (..., N, V) standard Gumbel noise (float64), used when ``temperature > 0``.

    Returns:
        (..., N) long token ids.
    """
    if temperature > 0:
        return (log_probs.double() / temperature + noise).argmax(-1)
    return log_probs.argmax(-1)


def entropy_from_log_probs(log_probs: torch.Tensor) -> torch.Tensor:
    """(...,) entropy in nats of the distributions (..., V) given as log-probabilities."""
    return torch.special.entr(log_probs.exp()).sum(-1)
