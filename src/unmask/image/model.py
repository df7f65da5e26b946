"""The digits MDM: an :class:`~unmask.models.transformer.MDMTransformer` whose vocabulary
depends on the position (class tokens at position 0, grey levels at the 64 pixels)."""

from __future__ import annotations

import dataclasses

import torch

from unmask.image.data import N_CLASSES, SEQ_LEN, levels_of
from unmask.models.base import ModelOutput
from unmask.models.transformer import MDMTransformer, TransformerConfig
from unmask.pretrained import model_folder


class DigitsMDM(MDMTransformer):
    """``[class] + 64 pixels`` -> logits (B, 65, V) that are -inf outside each position's
    vocabulary: position 0 admits only class tokens, pixels only grey levels.

    ``config.real_token_ids`` lists the grey levels (what training predicts); this model's
    ``real_token_ids`` also hold the class tokens, so a prompt's class is a valid given token.
    Weights and config are those of a plain :class:`MDMTransformer` (``from_pretrained``
    reads either).
    """

    def __init__(self, config: TransformerConfig):
        super().__init__(config)
        levels = levels_of(self)
        self.real_token_ids = tuple(range(levels + N_CLASSES))
        allowed = torch.zeros(SEQ_LEN, config.vocab_size, dtype=torch.bool)
        allowed[0, levels:levels + N_CLASSES] = True
        allowed[1:, :levels] = True
        self.register_buffer("allowed", allowed, persistent=False)

    def forward(self, tokens: torch.Tensor, output_hidden_layers: bool = False,
                prev_probs: torch.Tensor | None = None) -> ModelOutput:
        out = super().forward(tokens, output_hidden_layers, prev_probs)
        logits = out.logits.masked_fill(~self.allowed[:tokens.shape[1]], -torch.inf)
        return dataclasses.replace(out, logits=logits)


def load_digits_model(name_or_path: str | None = None) -> DigitsMDM:
    """The digits MDM by shipped name or folder (None: the shipped ``image`` model)."""
    return DigitsMDM.from_pretrained(model_folder(name_or_path, "image")).eval()
