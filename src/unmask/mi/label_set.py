"""Ground-truth MI label sets (what ``unmask mi label`` writes), as the estimator trains on them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from unmask.errors import UnmaskError, require
from unmask.mi.label_files import read_labels
from unmask.models.base import MaskedModel


@dataclass
class LabelSet:
    """Ground-truth MI for M contexts of length N.

    tokens: (M, N) long with MASK at the masked positions.
    mi: (M, N, N) float symmetric MI in nats (0 off masked pairs).
    groups: (M,) long puzzle id of each context (the unit of the held-out split).
    model_fingerprint: the MDM the labels were probed on.
    identity: what made the labels (the label folder's identity), for the record.
    directed: optional (M, N, N) float, the probe's directed values (row i probed), from
        which ``mi`` was symmetrised; read from a label folder, not carried by moved copies.
    """

    tokens: torch.Tensor
    mi: torch.Tensor
    groups: torch.Tensor
    model_fingerprint: str
    identity: dict | None = None
    directed: torch.Tensor | None = None

    def __post_init__(self):
        m, n = self.tokens.shape
        require(self.mi.shape == (m, n, n),
                f"mi: expected shape {(m, n, n)}, got {tuple(self.mi.shape)}")
        require(self.groups.shape == (m,),
                f"groups: expected shape {(m,)}, got {tuple(self.groups.shape)}")
        require(self.directed is None or self.directed.shape == (m, n, n),
                f"directed: expected shape {(m, n, n)}, got "
                f"{None if self.directed is None else tuple(self.directed.shape)}")

    @property
    def resolved(self) -> torch.Tensor | None:
        """(M, N, N) bool, the pairs whose label exceeds its probe asymmetry
        (:func:`label_resolution`); None without the directed values."""
        return None if self.directed is None else label_resolution(self.mi, self.directed)

    def __len__(self) -> int:
        return self.tokens.shape[0]

    @classmethod
    def from_dir(cls, path: str | Path) -> LabelSet:
        """Read a label folder written by ``unmask mi label``."""
        path = Path(path)
        if not path.is_dir():
            raise UnmaskError(f"labels: {path} is not a directory")
        tensors, manifest = read_labels(path)
        if "tokens" not in tensors or "mi" not in tensors:
            raise UnmaskError(f"labels: {path} holds no contexts")
        identity = manifest.get("identity", {})
        # every context of a label folder is drawn from its own puzzle grid
        groups = torch.arange(len(tensors["tokens"]))
        directed = tensors["directed"].float() if "directed" in tensors else None
        return cls(tensors["tokens"].long(), tensors["mi"].float(), groups,
                   identity.get("model_fingerprint", ""), identity, directed)

    def moved(self, index: torch.Tensor, cell_perm: np.ndarray,
              token_map: np.ndarray) -> LabelSet:
        """Contexts ``index`` (K,) moved by K symmetries: position i of copy k is position
        cell_perm[k, i] of the original, tokens relabelled by token_map[k] (K, V), the MI
        matrix permuted alike; each copy keeps its original's group (so the held-out split
        never separates a context from its copies)."""
        perm = torch.from_numpy(np.asarray(cell_perm, dtype=np.int64))
        tmap = torch.from_numpy(np.asarray(token_map, dtype=np.int64))
        require(perm.shape == (len(index), self.tokens.shape[1]),
                f"cell_perm: expected shape {(len(index), self.tokens.shape[1])}, "
                f"got {tuple(perm.shape)}")
        tokens = torch.gather(tmap, 1, torch.gather(self.tokens[index], 1, perm))
        mi = self.mi[index]
        mi = torch.gather(mi, 1, perm[:, :, None].expand_as(mi))
        mi = torch.gather(mi, 2, perm[:, None, :].expand_as(mi))
        return LabelSet(tokens, mi, self.groups[index], self.model_fingerprint, self.identity)

    def check_model(self, model: MaskedModel) -> None:
        """Raise :class:`UnmaskError` unless the labels were probed on ``model``."""
        got = model.fingerprint()
        if self.model_fingerprint != got:
            raise UnmaskError(f"labels: probed on model {self.model_fingerprint or '?'}, "
                              f"not on this model ({got})")


def label_resolution(mi: torch.Tensor, directed: torch.Tensor) -> torch.Tensor:
    """(M, N, N) bool: the pairs whose symmetrised label ``mi`` exceeds half the difference of
    the probe's two directions, |MI_ij - MI_ji| / 2 (``directed`` (M, N, N), row i probed).

    For one joint distribution the two directions agree; an MDM's conditionals need not form
    one, and where the directions differ by more than the value the label does not fix the
    pair's rank (on Sudoku: pairs with a near-certain cell, whose MI is at the scale of that
    disagreement, or clipped to exactly 0)."""
    d = directed.double()
    return mi.double() > (d - d.transpose(1, 2)).abs() / 2
