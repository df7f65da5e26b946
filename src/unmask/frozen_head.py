"""A small module that reads one MDM's frozen forward pass, and belongs to that MDM.

The MI estimator (:mod:`unmask.mi.estimator`) and the corrector (:mod:`unmask.corrector`) are
both heads of this kind: trained on one model's hidden states, meaningless on another's. A head
is saved as ``config.json`` (its dataclass config, which records the MDM's
:meth:`~unmask.models.base.MaskedModel.fingerprint`) + a safetensors file, and loading or
running it against another model raises :class:`UnmaskError`.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import ClassVar

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file
from torch import nn

from unmask.errors import UnmaskError
from unmask.io import atomic_path, atomic_write_text, parse_json
from unmask.models.base import MaskedModel, ModelOutput, weights_fingerprint
from unmask.models.transformer import Block, TransformerConfig
from unmask.pretrained import PRETRAINED_DIR
from unmask.probs import entropy_from_log_probs

CONFIG_FILE = "config.json"


def frozen_features(model: MaskedModel, tokens: torch.Tensor,
                    read: Callable[[ModelOutput, torch.Tensor], torch.Tensor], width: int, *,
                    output_hidden_layers: bool = False, batch_size: int = 256,
                    dtype: torch.dtype = torch.float16,
                    progress: Callable[[int], None] | None = None) -> torch.Tensor:
    """(M, N, width) what a head reads, ``read(output, tokens)``, of ``model``'s passes on
    ``tokens`` (M, N), in batches, stored on the CPU in ``dtype``: the MDM is frozen, so a
    head's training computes this once."""
    model.check_tokens(tokens)
    parts = []
    with torch.inference_mode():
        for lo in range(0, len(tokens), batch_size):
            x = tokens[lo:lo + batch_size].to(model.device)
            out = model(x, output_hidden_layers=output_hidden_layers)
            parts.append(read(out, x).to("cpu", dtype))
            if progress is not None:
                progress(min(lo + batch_size, len(tokens)))
    return torch.cat(parts) if parts else torch.zeros(0, tokens.shape[1], width, dtype=dtype)


def marginal_features(logits: torch.Tensor, real_ids: torch.Tensor) -> torch.Tensor:
    """(B, N, K + 1) what a head reads of a pass's logits (B, N, V): the probabilities of the
    K real tokens ``real_ids`` (a softmax over their logits) and their entropy in nats."""
    log_p = torch.log_softmax(logits.index_select(-1, real_ids).float(), dim=-1)
    return torch.cat([log_p.exp(), entropy_from_log_probs(log_p).unsqueeze(-1)], dim=-1)


def mixer_blocks(d: int, n_heads: int, n_layers: int) -> nn.ModuleList:
    """``n_layers`` pre-LN transformer blocks of width ``d`` (the MDM's own block), with which
    a head lets positions read each other."""

    cfg = TransformerConfig(vocab_size=2, mask_id=1, max_length=1, d_model=d,
                            n_layers=max(1, n_layers), n_heads=n_heads, d_ff=4 * d)
    return nn.ModuleList(Block(cfg) for _ in range(n_layers))


class FrozenHead(nn.Module):
    """Base class. Subclasses set ``MODEL_TYPE``, ``WEIGHTS_FILE``, ``KIND`` (a word for
    messages) and ``CONFIG_CLASS`` (a dataclass with ``hidden_size`` and
    ``model_fingerprint``), and keep their config in ``self.config``."""

    MODEL_TYPE: ClassVar[str] = ""
    WEIGHTS_FILE: ClassVar[str] = ""
    KIND: ClassVar[str] = "head"
    CONFIG_CLASS: ClassVar[type] = object

    def check_model(self, model: MaskedModel) -> None:
        """Raise :class:`UnmaskError` unless this head was trained on ``model``."""
        if model.hidden_size != self.config.hidden_size:
            raise UnmaskError(f"model: hidden size {model.hidden_size} does not match the "
                              f"{self.KIND}'s {self.config.hidden_size}")
        want = self.config.model_fingerprint
        if not want:
            return
        # the fingerprint hashes every weight: cache it per model object and weight version
        key = (id(model), sum(p._version for p in model.parameters()))
        if getattr(self, "_checked", None) == key:
            return
        got = model.fingerprint()
        if got != want:
            raise UnmaskError(f"model: fingerprint {got} does not match the {self.KIND}'s MDM "
                              f"{want} (an {self.KIND} only works with the model it was "
                              "trained on)")
        self._checked = key

    def fingerprint(self) -> str:
        """A short hash of this head's own weights (not its MDM's), so that a result can say
        which head produced it: a shipped name outlives its weights."""
        return weights_fingerprint(self, self.MODEL_TYPE)

    def save(self, directory: str | Path, extra: dict | None = None) -> None:
        """Write ``config.json`` and the weights atomically into ``directory``."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        state = {k: v.detach().contiguous().cpu() for k, v in self.state_dict().items()}
        with atomic_path(directory / self.WEIGHTS_FILE) as tmp:
            save_file(state, str(tmp), metadata={"model_fingerprint":
                                                 self.config.model_fingerprint})
        meta = {"model_type": self.MODEL_TYPE, "config": asdict(self.config), **(extra or {})}
        atomic_write_text(directory / CONFIG_FILE, json.dumps(meta, indent=2) + "\n")

    @classmethod
    def load(cls, directory: str | Path, model: MaskedModel | None = None,
             map_location: str = "cpu"):
        """Load a head; with ``model``, raise unless it was trained on that model."""
        directory = Path(directory)
        cfg_path, weights = directory / CONFIG_FILE, directory / cls.WEIGHTS_FILE
        if not cfg_path.is_file() or not weights.is_file():
            raise UnmaskError(f"{cls.KIND}: {directory} has no {CONFIG_FILE} + "
                              f"{cls.WEIGHTS_FILE}")
        try:
            meta = parse_json(cfg_path.read_text())
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise UnmaskError(f"{cls.KIND}: {cfg_path} is not JSON ({type(e).__name__})"
                              ) from None
        if not isinstance(meta, dict) or meta.get("model_type") != cls.MODEL_TYPE:
            raise UnmaskError(f"{cls.KIND}: {cfg_path} is not an {cls.MODEL_TYPE} config")
        try:
            head = cls(cls.CONFIG_CLASS(**meta["config"]))
        except (KeyError, TypeError) as e:
            raise UnmaskError(f"{cls.KIND}: {cfg_path} holds no valid config ({type(e).__name__}"
                              f": {e})") from None
        try:
            head.load_state_dict(load_file(str(weights), device=map_location))
        except (SafetensorError, RuntimeError, OSError) as e:
            raise UnmaskError(f"{cls.KIND}: {weights} is truncated or does not match "
                              f"{CONFIG_FILE} ({type(e).__name__})") from None
        head.metadata = {k: v for k, v in meta.items() if k != "config"}
        head.eval()
        if model is not None:
            head.check_model(model)
        return head


def resolve_head_dir(name_or_path: str | Path, kind: str) -> Path:
    """A head's folder: ``name_or_path`` itself, or a shipped head of that name."""

    path = Path(name_or_path)
    if path.is_dir():
        return path
    shipped = PRETRAINED_DIR / str(name_or_path)
    if not shipped.is_dir():
        raise UnmaskError(f"{kind}: {name_or_path} is neither a folder nor a shipped {kind}")
    return shipped


def load_frozen_head(cls, name_or_path, model: MaskedModel | None = None):
    """Load a head of class ``cls`` from a folder or a shipped name."""
    return cls.load(resolve_head_dir(name_or_path, cls.KIND), model=model)

