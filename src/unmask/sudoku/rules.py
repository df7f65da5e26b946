"""The Sudoku rules as a decode constraint (:class:`~unmask.constraints.base.Constraint`):
no digit twice in a row, column or box, and a parallel commit may not place one digit twice in
a unit. Not exact (whether a board can still be completed is a search): decoding under the
rules can reach a dead end, a blank with no digit its peers leave, and that row then ends
(``stats["dead_end"]``)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from unmask.constraints.base import Constrain
from unmask.errors import UnmaskError, require
from unmask.sudoku.maps import peer_mask
from unmask.sudoku.tokens import MASK_ID, NUM_CELLS


class SudokuRules:
    """Allowed digits of a blank: those none of its row, column and box peers holds; a board
    is feasible while no two peers hold the same digit. Tokens (R, 81), digit d as d - 1."""

    def prepare(self, model, tokens):
        require(tokens.shape[1] == NUM_CELLS and model.mask_id == MASK_ID,
                f"rules: the Sudoku rules read boards of {NUM_CELLS} cells (token = digit - "
                f"1, MASK {MASK_ID}), got rows of {tokens.shape[1]}")
        self.peers = peer_mask().to(tokens.device).float()   # (81, 81)
        self.vocab = model.vocab_size
        ok = self.feasible(tokens, torch.arange(len(tokens), device=tokens.device))
        if not bool(ok.all()):
            raise UnmaskError(f"rules: puzzle {int((~ok).nonzero()[0])}: its clues repeat a "
                              "digit in a row, column or box")

    def _digits(self, tokens):
        """(R, 81, 9) float one-hot of the filled cells' digits."""
        filled = tokens != MASK_ID
        return torch.nn.functional.one_hot(torch.where(filled, tokens, 0), 9).float() \
            * filled[..., None]

    def allowed(self, tokens, rows, columns):
        used = torch.einsum("ij,rjd->rid", self.peers, self._digits(tokens)) > 0  # (R, 81, 9)
        out = torch.ones(*tokens.shape, self.vocab, dtype=torch.bool, device=tokens.device)
        blank = (tokens == MASK_ID)[..., None]
        out[..., :9] = ~(used & blank)
        return out[:, columns]

    def feasible(self, tokens, rows):
        digits = self._digits(tokens)
        clash = torch.einsum("ij,rjd,rid->r", self.peers, digits, digits)
        return clash == 0


@dataclass(frozen=True)
class RulesExtras:
    """A sweep run's extras (:class:`unmask.bench.sweep.Run`): decode under the rules."""

    def sampler(self, sampler):
        return sampler

    def hooks(self):
        return [Constrain(SudokuRules())]
