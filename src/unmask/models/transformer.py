"""A small bidirectional pre-LN transformer MDM, saved as safetensors + JSON config."""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
import torch.nn.functional as F
from safetensors.torch import save_file
from torch import nn

from unmask.errors import UnmaskError, require
from unmask.io import atomic_path, atomic_write_text
from unmask.models.base import MaskedModel, ModelOutput
from unmask.models.files import (
    dataclass_from_dict,
    load_checked_state,
    load_safetensors,
    read_json_object,
)
from unmask.validation import is_int

POSITION_KINDS = ("learned", "grid", "none")


@dataclass
class TransformerConfig:
    """Shape of an :class:`MDMTransformer`.

    position: 'learned' (1-D table), 'grid' (row + column + box tables for a ``grid_side`` x
    ``grid_side`` board with ``grid_box`` x ``grid_box`` boxes, both given by the task) or
    'none'.
    n_loops: the stack of ``n_layers`` is applied this many times with shared weights (depth
    without parameters).
    relation_bias: (grid only) each attention head adds a learned bias per relation between two
    cells (same row / column / box, as 3 bits), so the constraint graph is given, not learned.
    self_condition: each position's input also carries a linear map of the distribution
    (over the vocabulary) that the previous pass predicted there, so a decoder's passes build
    on each other's beliefs, not only on the revealed tokens; zero where there is none (the
    first pass, revealed positions). Trained on the model's own first-pass predictions.
    """

    vocab_size: int
    mask_id: int
    max_length: int
    real_token_ids: list[int] = field(default_factory=list)
    d_model: int = 128
    n_layers: int = 4
    n_heads: int = 4
    d_ff: int = 512
    n_loops: int = 1
    dropout: float = 0.0
    position: str = "learned"
    grid_side: int | None = None
    grid_box: int | None = None
    relation_bias: bool = False
    self_condition: bool = False
    task: str = ""

    def __post_init__(self):
        if not self.real_token_ids:
            self.real_token_ids = [i for i in range(self.vocab_size) if i != self.mask_id]
        require(self.vocab_size >= 2, f"vocab_size: must be >= 2, got {self.vocab_size}")
        require(0 <= self.mask_id < self.vocab_size,
                f"mask_id: {self.mask_id} is outside [0, vocab_size={self.vocab_size})")
        require(self.mask_id not in self.real_token_ids, "real_token_ids: must not contain mask_id")
        require(all(0 <= t < self.vocab_size for t in self.real_token_ids),
                "real_token_ids: ids must lie in [0, vocab_size)")
        require(self.max_length >= 1, f"max_length: must be >= 1, got {self.max_length}")
        require(self.d_model % self.n_heads == 0,
                f"d_model: {self.d_model} is not divisible by n_heads={self.n_heads}")
        require(self.n_layers >= 1 and self.n_loops >= 1, "n_layers, n_loops: must be >= 1")
        require(0.0 <= self.dropout < 1.0, f"dropout: must be in [0, 1), got {self.dropout}")
        require(self.position in POSITION_KINDS,
                f"position: expected one of {POSITION_KINDS}, got {self.position!r}")
        if self.position == "grid":
            require(is_int(self.grid_side) and is_int(self.grid_box)
                    and self.grid_side >= 1 and self.grid_box >= 1,
                    "grid_side, grid_box: a grid position embedding needs the board's side and "
                    f"box, got {self.grid_side!r}, {self.grid_box!r}")
            require(self.max_length == self.grid_side**2,
                    f"max_length: a grid position embedding needs {self.grid_side**2} positions")
            require(self.grid_side % self.grid_box == 0, "grid_box: must divide grid_side")
        require(not self.relation_bias or self.position == "grid",
                "relation_bias: needs position='grid'")


N_RELATIONS = 8  # 3 bits: same row, same column, same box


def grid_relations(side: int, box: int) -> torch.Tensor:
    """(side^2, side^2) long in [0, 8): bit 0 same row, bit 1 same column, bit 2 same box."""
    idx = torch.arange(side * side)
    r, c = idx // side, idx % side
    b = (r // box) * (side // box) + c // box
    return ((r[:, None] == r[None]).long() + 2 * (c[:, None] == c[None]).long()
            + 4 * (b[:, None] == b[None]).long())


class Block(nn.Module):
    def __init__(self, cfg: TransformerConfig):
        super().__init__()
        self.n_heads = cfg.n_heads
        self.rel_bias = (nn.Parameter(torch.zeros(cfg.n_heads, N_RELATIONS))
                         if cfg.relation_bias else None)
        self.ln1 = nn.LayerNorm(cfg.d_model)
        self.qkv = nn.Linear(cfg.d_model, 3 * cfg.d_model)
        self.proj = nn.Linear(cfg.d_model, cfg.d_model)
        self.ln2 = nn.LayerNorm(cfg.d_model)
        self.ff = nn.Sequential(nn.Linear(cfg.d_model, cfg.d_ff), nn.GELU(),
                                nn.Linear(cfg.d_ff, cfg.d_model))
        self.dropout = cfg.dropout

    def _qkv_bias(self, x: torch.Tensor, relations: torch.Tensor | None):
        b, n, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, n, 3, self.n_heads, d // self.n_heads).unbind(2)
        bias = None
        if self.rel_bias is not None:
            bias = self.rel_bias[:, relations[:n, :n]].to(q.dtype)  # (H, N, N)
        return q, k, v, bias

    def attention_probs(self, x: torch.Tensor,
                        relations: torch.Tensor | None = None) -> torch.Tensor:
        """(B, H, N, N) attention weights of this block on its input ``x`` (B, N, D): row i is
        how position i reads every j (what ``forward`` computes inside fused attention)."""
        q, k, _, bias = self._qkv_bias(x, relations)
        logits = torch.einsum("bihd,bjhd->bhij", q, k) / math.sqrt(q.shape[-1])
        return (logits if bias is None else logits + bias).softmax(-1)

    def forward(self, x: torch.Tensor, relations: torch.Tensor | None = None,
                weights: list[torch.Tensor] | None = None) -> torch.Tensor:
        """weights: a list to append this block's (B, H, N, N) attention weights to; the
        attention is then computed explicitly (the same function as the fused kernel)."""
        b, n, d = x.shape
        q, k, v, bias = self._qkv_bias(x, relations)
        drop = self.dropout if self.training else 0.0
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
        if weights is None:
            att = F.scaled_dot_product_attention(q, k, v, attn_mask=bias, dropout_p=drop)
        else:
            logits = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
            probs = (logits if bias is None else logits + bias).softmax(-1)
            weights.append(probs)
            att = F.dropout(probs, drop, self.training) @ v
        x = x + F.dropout(self.proj(att.transpose(1, 2).reshape(b, n, d)), drop, self.training)
        return x + F.dropout(self.ff(self.ln2(x)), drop, self.training)


# the parameters that write a block's result into the residual stream
_BLOCK_OUTPUTS = ("proj.weight", "proj.bias", "ff.2.weight", "ff.2.bias")


class MDMTransformer(MaskedModel):
    """Bidirectional transformer: tokens (B, N) -> logits (B, N, V), hidden (B, N, D)."""

    full_rows = True  # trained on rows of max_length positions

    def __init__(self, config: TransformerConfig):
        super().__init__()
        self.config = config
        self.vocab_size = config.vocab_size
        self.mask_id = config.mask_id
        self.max_length = config.max_length
        self.hidden_size = config.d_model
        self.real_token_ids = tuple(config.real_token_ids)
        self.task = config.task
        self.autocast_bf16 = False  # set True for faster CPU inference
        d = config.d_model
        self.tok = nn.Embedding(config.vocab_size, d)
        if config.position == "learned":
            self.pos = nn.Embedding(config.max_length, d)
        elif config.position == "grid":
            side, box = config.grid_side, config.grid_box
            self.row = nn.Embedding(side, d)
            self.col = nn.Embedding(side, d)
            self.box = nn.Embedding(side, d)
            idx = torch.arange(side * side)
            r, c = idx // side, idx % side
            self.register_buffer("grid_index", torch.stack(
                [r, c, (r // box) * (side // box) + c // box]), persistent=False)
            self.register_buffer("relations", grid_relations(side, box), persistent=False)
        self.blocks = nn.ModuleList(Block(config) for _ in range(config.n_layers))
        self.ln_f = nn.LayerNorm(d)
        self.head = nn.Linear(d, config.vocab_size)
        self.apply(self._init)
        if config.self_condition:  # zero at first: the model starts as if it had no beliefs
            self.prev_embed = nn.Linear(config.vocab_size, d, bias=False)
            nn.init.zeros_(self.prev_embed.weight)
        for blk in self.blocks:  # scaled residual init keeps deep stacks stable
            std = 0.02 / math.sqrt(2 * config.n_layers * config.n_loops)
            nn.init.normal_(blk.proj.weight, std=std)
            nn.init.normal_(blk.ff[2].weight, std=std)

    @staticmethod
    def _init(m: nn.Module) -> None:
        if isinstance(m, nn.Linear):
            nn.init.normal_(m.weight, std=0.02)
            nn.init.zeros_(m.bias)
        elif isinstance(m, nn.Embedding):
            nn.init.normal_(m.weight, std=0.02)

    def embed(self, tokens: torch.Tensor) -> torch.Tensor:
        n = tokens.shape[1]
        x = self.tok(tokens)
        if self.config.position == "learned":
            x = x + self.pos.weight[:n]
        elif self.config.position == "grid":
            r, c, b = self.grid_index[:, :n]
            x = x + self.row(r) + self.col(c) + self.box(b)
        return x

    @property
    def self_conditioning(self) -> bool:
        return self.config.self_condition

    @property
    def supports_attentions(self) -> bool:
        return True

    def forward(self, tokens: torch.Tensor, output_hidden_layers: bool = False,
                prev_probs: torch.Tensor | None = None,
                output_attentions: bool = False) -> ModelOutput:
        """prev_probs: (B, N, V) the previous pass's predicted distributions (zeros where there
        are none); read only by a self-conditioning model, None = no previous pass.
        output_attentions: also return every applied block's (B, H, N, N) attention weights
        (``ModelOutput.attentions``, one per block and loop, in order)."""
        with torch.autocast("cpu", dtype=torch.bfloat16,
                            enabled=self.autocast_bf16 and tokens.device.type == "cpu"):
            x = self.embed(tokens)
            if self.config.self_condition and prev_probs is not None:
                x = x + self.prev_embed(prev_probs.to(x.dtype))
            layers = [x] if output_hidden_layers else None
            weights: list[torch.Tensor] | None = [] if output_attentions else None
            for _ in range(self.config.n_loops):
                for blk in self.blocks:
                    x = blk(x, getattr(self, "relations", None), weights)
                    if layers is not None:
                        layers.append(x)
            h = self.ln_f(x)
            logits = self.head(h)
        return ModelOutput(logits=logits.float(), hidden=h.float(),
                           hidden_layers=tuple(t.float() for t in layers) if layers else None,
                           attentions=None if weights is None else
                           tuple(w.float() for w in weights))

    def with_self_conditioning(self) -> MDMTransformer:
        """The same function with ``self_condition`` on: the previous pass's beliefs enter
        through a new map that starts at zero, so training from here teaches the model to
        use them without first losing what it has learned. This model is untouched."""
        cfg = TransformerConfig(**{**asdict(self.config), "self_condition": True})
        grown = MDMTransformer(cfg)
        missing, unexpected = grown.load_state_dict(self.state_dict(), strict=False)
        if unexpected or set(missing) - {"prev_embed.weight"}:
            raise RuntimeError(f"with_self_conditioning: weights did not carry over "
                               f"(missing {missing}, unexpected {unexpected})")
        grown.autocast_bf16 = self.autocast_bf16
        return grown.train(self.training)

    def deepened(self, factor: int) -> MDMTransformer:
        """A model with ``factor`` times the blocks that computes the same function.

        After each block come ``factor - 1`` copies of it whose output projections (attention
        ``proj`` and the second feed-forward layer, weights and biases) are zero: each copy
        starts as the identity on the residual stream, with the attention pattern of the block
        it copies, so training from here grows depth without first losing what the model has
        learned. Embeddings, final norm and head are copied as they are; this model is untouched.
        """
        require(is_int(factor) and factor >= 1,
                f"factor: must be an integer >= 1, got {factor!r}")
        cfg = TransformerConfig(**{**asdict(self.config),
                                   "n_layers": self.config.n_layers * factor})
        deep = MDMTransformer(cfg)
        own = self.state_dict()
        state = {k: v for k, v in own.items() if not k.startswith("blocks.")}
        for i in range(self.config.n_layers):
            prefix = f"blocks.{i}."
            block = {k[len(prefix):]: v for k, v in own.items() if k.startswith(prefix)}
            for copy in range(factor):
                for name, value in block.items():
                    silent = copy > 0 and name in _BLOCK_OUTPUTS
                    state[f"blocks.{i * factor + copy}.{name}"] = (
                        torch.zeros_like(value) if silent else value.clone())
        deep.load_state_dict(state)
        deep.autocast_bf16 = self.autocast_bf16
        return deep.train(self.training)

    def save_pretrained(self, directory: str | Path, extra: dict | None = None) -> None:
        """Write ``config.json`` and ``model.safetensors`` atomically into ``directory``."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        state = {k: v.detach().contiguous().cpu() for k, v in self.state_dict().items()}
        with atomic_path(directory / "model.safetensors") as tmp:
            save_file(state, str(tmp))
        meta = {"model_type": "mdm-transformer", "config": asdict(self.config), **(extra or {})}
        atomic_write_text(directory / "config.json", json.dumps(meta, indent=2) + "\n")

    @classmethod
    def from_pretrained(cls, directory: str | Path, map_location: str = "cpu", *,
                        meta: dict | None = None) -> MDMTransformer:
        """Load ``config.json`` + ``model.safetensors`` from ``directory`` (``meta``: the
        config.json, when the caller has read it). The config is checked key by key
        (:func:`~unmask.models.files.dataclass_from_dict`) and the weights name by name and
        shape by shape against the model it describes; any mismatch, or a truncated/empty
        weights file, is one :class:`UnmaskError` line."""
        directory = Path(directory)
        cfg_path, weights = directory / "config.json", directory / "model.safetensors"
        if not cfg_path.is_file() or not weights.is_file():
            raise UnmaskError(f"model: {directory} has no config.json + model.safetensors")
        meta = read_json_object(cfg_path) if meta is None else meta
        if meta.get("model_type") != "mdm-transformer":
            raise UnmaskError(f"model: {cfg_path} is not an mdm-transformer config")
        config = dataclass_from_dict(TransformerConfig, meta.get("config"),
                                     f"{cfg_path} 'config'")
        model = cls(config)
        load_checked_state(model, load_safetensors(weights, map_location), str(weights))
        model.metadata = {k: v for k, v in meta.items() if k != "config"}
        return model.eval()
