"""The corrector: a small head on an MDM's frozen pass that finds decoded tokens that are wrong.

A parallel decoder commits several tokens per pass; some are wrong, and a masked diffusion
model never takes a token back. The corrector reads the same forward pass the decoder makes
anyway and gives, for every position, the probability that the token there is wrong; the
decode loop (``decode(..., corrector=)``) masks again the decoded tokens above
``DecodeConfig.remask_threshold`` and decodes them anew, and checks every finished row with
one more pass.

Features per position (F = D + K + 1 + V): the frozen final hidden states (D), the model's
marginals over its K real tokens and their entropy, and the one-hot current token (V, MASK
included). The marginals carry the evidence against a wrong token: after it, some masked
position has no consistent value left, or is sure of a value a peer already holds.

    f (B, N, F) -> Linear(F, d) + GELU -> ``layers`` pre-LN transformer blocks (d) -> LayerNorm
    -> Linear(d, 1): the logit that the token at each position is wrong (B, N)

Trained (:func:`train_corrector`) with binary cross-entropy on the decoded positions of states
that a decoder really visits (:func:`decoded_states`), labelled against the known answer.
"""

from __future__ import annotations

import functools
import json
import math
import pickle
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

import torch
import torch.nn.functional as F
from torch import nn

from unmask.decode import DecodeConfig, decode
from unmask.errors import UnmaskError, require
from unmask.frozen_head import (
    FrozenHead,
    frozen_features,
    load_frozen_head,
    marginal_features,
    mixer_blocks,
)
from unmask.io import atomic_path
from unmask.metrics import held_out_mask, roc_auc
from unmask.models.base import MaskedModel, ModelOutput
from unmask.parallel.shard_store import content_digest
from unmask.pretrained import shipped_head
from unmask.samplers import make_sampler
from unmask.training.loop import LoopConfig, fit
from unmask.validation import is_int


@dataclass
class CorrectorConfig:
    """Shape of a :class:`Corrector` and the MDM it reads.

    hidden_size: D, the width of the MDM's final hidden states.
    vocab_size: V, the MDM's vocabulary (MASK included): the one-hot current token.
    real_token_ids: the MDM's K real tokens, over which its marginals are read.
    d, n_heads, layers: width, attention heads and transformer blocks of the head.
    model_fingerprint: :meth:`MaskedModel.fingerprint` of the MDM ("" = not tied yet).
    """

    hidden_size: int
    vocab_size: int
    real_token_ids: list[int]
    d: int = 64
    n_heads: int = 4
    layers: int = 2
    model_fingerprint: str = ""

    def __post_init__(self):
        self.real_token_ids = [int(t) for t in self.real_token_ids]
        require(is_int(self.hidden_size) and self.hidden_size >= 1,
                f"hidden_size: must be an integer >= 1, got {self.hidden_size!r}")
        require(is_int(self.vocab_size) and self.vocab_size >= 2,
                f"vocab_size: must be an integer >= 2, got {self.vocab_size!r}")
        require(len(self.real_token_ids) >= 2 and
                all(0 <= t < self.vocab_size for t in self.real_token_ids),
                f"real_token_ids: need at least 2 ids below vocab_size={self.vocab_size}")
        require(self.layers >= 0, f"layers: must be >= 0, got {self.layers}")
        require(self.d >= 1 and self.d % self.n_heads == 0,
                f"d: must be >= 1 and divisible by n_heads={self.n_heads}, got {self.d}")

    @property
    def feature_size(self) -> int:
        """F = D + K + 1 + V."""
        return self.hidden_size + len(self.real_token_ids) + 1 + self.vocab_size

    @classmethod
    def for_model(cls, model: MaskedModel, **kw) -> CorrectorConfig:
        """A config that reads ``model`` (and is tied to its fingerprint)."""
        return cls(hidden_size=model.hidden_size, vocab_size=model.vocab_size,
                   real_token_ids=list(model.real_token_ids),
                   model_fingerprint=model.fingerprint(), **kw)


class Corrector(FrozenHead):
    """features (B, N, F) -> logits (B, N) that each position's token is wrong."""

    MODEL_TYPE = "corrector"
    WEIGHTS_FILE = "corrector.safetensors"
    KIND = "corrector"
    CONFIG_CLASS = CorrectorConfig

    def __init__(self, config: CorrectorConfig):
        super().__init__()
        self.config = config
        d = config.d
        self.adapter = nn.Linear(config.feature_size, d)
        self.blocks = mixer_blocks(d, config.n_heads, config.layers)
        self.norm = nn.LayerNorm(d)
        self.out = nn.Linear(d, 1)
        # what features() indexes and compares with, kept where the head runs (no list
        # turned into a tensor, no host copy, each pass); not saved with the weights
        self.register_buffer("real_ids", torch.tensor(config.real_token_ids), persistent=False)
        self.register_buffer("vocab", torch.arange(config.vocab_size), persistent=False)

    def features(self, output: ModelOutput, tokens: torch.Tensor) -> torch.Tensor:
        """(B, N, F) what the head reads of a pass ``output`` on ``tokens`` (B, N)."""
        cfg = self.config
        if output.hidden.shape[-1] != cfg.hidden_size or output.logits.shape[-1] != cfg.vocab_size:
            raise UnmaskError(f"output: expected hidden size {cfg.hidden_size} and "
                              f"{cfg.vocab_size} logits, got {output.hidden.shape[-1]} and "
                              f"{output.logits.shape[-1]}")
        device = output.logits.device
        marginals = marginal_features(output.logits, self.real_ids.to(device))
        one_hot = (tokens.to(device)[..., None] == self.vocab.to(device)).float()
        return torch.cat([output.hidden.float(), marginals, one_hot], dim=-1)

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        """Logits (B, N) that each position's token is wrong, from features (B, N, F)."""
        if features.dim() != 3 or features.shape[-1] != self.config.feature_size:
            raise UnmaskError(f"features: expected shape (B, N, {self.config.feature_size}), "
                              f"got {tuple(features.shape)}")
        a = F.gelu(self.adapter(features.to(self.adapter.weight.dtype)))
        for blk in self.blocks:
            a = blk(a)
        return self.out(self.norm(a)).squeeze(-1)

    def wrong_probs(self, output: ModelOutput, tokens: torch.Tensor) -> torch.Tensor:
        """(B, N) probability that the token at each position of ``tokens`` is wrong, from the
        model's pass ``output`` on them (what the decode loop calls)."""
        return torch.sigmoid(self(self.features(output, tokens)))


def load_corrector(name_or_path: str | Path | None = None,
                   model: MaskedModel | None = None) -> Corrector:
    """Load a corrector from a folder or by shipped name (default: the one shipped for
    ``model``'s task, :func:`unmask.pretrained.shipped_head`); with ``model``, raise unless
    it was trained on that model."""
    return load_frozen_head(Corrector, name_or_path or shipped_head(Corrector.KIND, model),
                            model=model)


# -- training data: the states a decoder visits --------------------------------------------

@dataclass
class DecodedStates:
    """States a decoder visited, with what is wrong in them.

    tokens: (M, N) the states (MASK where still hidden).
    wrong: (M, N) bool, decoded positions whose token differs from the answer.
    decoded: (M, N) bool, positions decoded so far (neither given nor MASK).
    groups: (M,) the source puzzle of each state (held-out splits keep a puzzle on one side).
    """

    tokens: torch.Tensor
    wrong: torch.Tensor
    decoded: torch.Tensor
    groups: torch.Tensor


def save_decoded_states(path: str | Path, key: dict, states: DecodedStates) -> None:
    """Write the states file :func:`load_decoded_states` reads, with the sha256 of its
    tensors and key, atomically."""
    tensors = vars(states)
    digest = content_digest(tensors, {"key": json.dumps(key, sort_keys=True)})
    with atomic_path(path) as tmp:
        torch.save({"key": key, "states": tensors, "sha256": digest}, tmp)


def load_decoded_states(path: str | Path, what: str = "states", *,
                        digest_required: bool = True) -> tuple[dict, DecodedStates]:
    """The states file ``unmask corrector train`` keeps (OUT/states.pt): its key (the model's
    fingerprint, the puzzle pool's size and seed, the samplers) and the states. Read with
    ``weights_only=True``, checked against its sha256 (``digest_required=False``: a file
    without one is accepted, as written before files had one); :class:`UnmaskError` naming
    ``what`` when it is not such a file."""
    try:
        saved = torch.load(path, map_location="cpu", weights_only=True)
        key, states = saved["key"], saved["states"]
        digest = content_digest(states, {"key": json.dumps(key, sort_keys=True)})
        legacy = not digest_required and "sha256" not in saved  # written before digests
        require(saved.get("sha256") == digest or legacy,
                f"{what}: {path} does not match its sha256 (changed or corrupted)")
        return key, DecodedStates(**states)
    except pickle.UnpicklingError:
        raise UnmaskError(f"{what}: {path} is not a states file of tensors and plain data "
                          "(refused, nothing in it was run)") from None
    except UnmaskError:
        raise
    except Exception as e:  # noqa: BLE001 - a damaged zip or pickle fails in many ways
        raise UnmaskError(f"{what}: {path} is not a states file of `unmask corrector train` "
                          f"({type(e).__name__})") from None


def decoded_states(model: MaskedModel, inputs: torch.Tensor, answers: torch.Tensor,
                   samplers: Sequence, *, seed: int = 0,
                   progress: Callable[[int], None] | None = None) -> DecodedStates:
    """Decode ``inputs`` (P, N) (answers (P, N)) and keep every state the loop passed through,
    each sampler decoding its own share of the rows (so the states cover several degrees of
    parallelism); a state is kept once (steps where a finished row stands still are not)."""

    require(len(samplers) >= 1, "samplers: need at least one")
    require(inputs.shape == answers.shape, f"answers: shape {tuple(answers.shape)} does not "
                                           f"match inputs {tuple(inputs.shape)}")
    mask_id = model.mask_id
    parts: list[tuple[torch.Tensor, ...]] = []
    shares = torch.arange(len(inputs)) % len(samplers)
    done = 0
    for k, spec in enumerate(samplers):
        rows = (shares == k).nonzero().squeeze(1)
        if not rows.numel():
            continue
        x, ans = inputs[rows], answers[rows]
        sampler = make_sampler(spec[0], **spec[1]) if isinstance(spec, tuple) else spec
        res = decode(model, x, sampler, DecodeConfig(record_history=True), seed=seed)
        given = x != mask_id
        prev = x
        for h in res.history:
            moved = (h != prev).any(1)
            if moved.any():
                s = h[moved]
                dec = (s != mask_id) & ~given[moved]
                parts.append((s, (s != ans[moved]) & dec, dec, rows[moved]))
            prev = h
        done += len(rows)
        if progress is not None:
            progress(done)
    require(bool(parts), "inputs: nothing to decode (no MASK in any row)")
    cols = list(zip(*parts, strict=True))
    return DecodedStates(*(torch.cat(c) for c in cols))


def compute_corrector_features(model: MaskedModel, corrector: Corrector, tokens: torch.Tensor,
                               batch_size: int = 256, dtype: torch.dtype = torch.float16,
                               progress: Callable[[int], None] | None = None) -> torch.Tensor:
    """(M, N, F) the corrector's features of ``model`` on ``tokens`` (M, N), stored in
    ``dtype`` (the MDM is frozen: computed once)."""
    return frozen_features(model, tokens, corrector.features, corrector.config.feature_size,
                           batch_size=batch_size, dtype=dtype, progress=progress)


# -- metrics -------------------------------------------------------------------------------

def corrector_metrics(probs: torch.Tensor, states: DecodedStates, threshold: float = 0.5
                      ) -> dict:
    """On the decoded positions: AUC, and at ``threshold`` the share of flagged tokens that
    are wrong (precision) and of wrong tokens flagged (recall)."""
    dec = states.decoded
    p, y = probs[dec], states.wrong[dec]
    flagged = p > threshold
    return {"positions": int(dec.sum()), "wrong": int(y.sum()), "auc": roc_auc(p, y),
            "precision": float((flagged & y).sum() / max(1, int(flagged.sum()))),
            "recall": float((flagged & y).sum() / max(1, int(y.sum())))}


# -- training ------------------------------------------------------------------------------

@dataclass
class CorrectorTrainConfig:
    """How :func:`train_corrector` runs.

    batch_size: states per step; lr: AdamW learning rate (cosine to lr/10 over max_epochs);
    max_epochs, patience: at most this many epochs, early stopping after ``patience`` epochs
    without a lower held-out loss; held_out: share of source puzzles held out; seed: shuffling
    and initialisation; max_time_s: stop after this many seconds; extra: metadata written
    into the saved corrector's config.json (the model, the training data).
    """

    batch_size: int = 64
    lr: float = 2e-3
    weight_decay: float = 0.01
    max_epochs: int = 30
    patience: int = 4
    held_out: float = 0.1
    seed: int = 0
    max_time_s: float | None = None
    extra: dict = field(default_factory=dict)

    #: the fields a resumed run may change: its time budget and the metadata it records
    RUN_FIELDS: ClassVar[tuple[str, ...]] = ("max_time_s", "extra")

    def __post_init__(self):
        require(self.batch_size >= 1, f"batch_size: must be >= 1, got {self.batch_size}")
        require(self.lr > 0, f"lr: must be > 0, got {self.lr}")
        require(self.max_epochs >= 1, f"max_epochs: must be >= 1, got {self.max_epochs}")
        require(self.patience >= 1, f"patience: must be >= 1, got {self.patience}")
        require(0 < self.held_out < 1, f"held_out: must be in (0, 1), got {self.held_out}")


def _bce(corrector: Corrector, feats: torch.Tensor, states: DecodedStates,
         index: torch.Tensor) -> torch.Tensor:
    logits = corrector(feats[index])
    dec = states.decoded[index]
    return F.binary_cross_entropy_with_logits(logits[dec], states.wrong[index][dec].float(),
                                              reduction="sum")


def predict_wrong(corrector: Corrector, feats: torch.Tensor, batch_size: int = 256
                  ) -> torch.Tensor:
    """(M, N) the corrector's probabilities on precomputed features (M, N, F)."""
    with torch.no_grad():
        return torch.cat([torch.sigmoid(corrector(feats[i:i + batch_size]))
                          for i in range(0, len(feats), batch_size)]) if len(feats) else \
            torch.zeros(feats.shape[:2])


@functools.lru_cache(maxsize=2)
def _epoch_order(n: int, seed: int, epoch: int) -> torch.Tensor:
    """The shuffle of ``n`` training states in ``epoch`` (0-based): the epoch-th permutation a
    generator seeded with ``seed`` draws, so the order is a function of (seed, epoch)."""
    gen = torch.Generator().manual_seed(seed)
    for _ in range(epoch):
        torch.randperm(n, generator=gen)
    return torch.randperm(n, generator=gen)


def train_corrector(corrector: Corrector, feats: torch.Tensor, states: DecodedStates,
                    cfg: CorrectorTrainConfig, out_dir: str | Path,
                    log: Callable[[str], None] = print, *, resume: bool = False,
                    override: bool = False, overwrite: bool = False,
                    data: dict | None = None) -> dict:
    """Train on precomputed ``feats`` (M, N, F) of ``states`` with
    :func:`unmask.training.loop.fit`: AdamW, cosine from ``cfg.lr`` to a tenth of it, one held-out
    evaluation per epoch. The best held-out corrector is saved to ``out_dir/best``, one line
    per epoch appended to ``out_dir/history.jsonl``, the state to ``out_dir/checkpoint.pt``
    (``resume``: continue from it; ``data``, what the states are, must match unless
    ``override``). Returns the held-out metrics of the best epoch."""
    out = Path(out_dir)
    test = held_out_mask(states.groups, cfg.held_out, cfg.seed)
    train_idx, test_idx = (~test).nonzero().squeeze(1), test.nonzero().squeeze(1)
    if not train_idx.numel() or not test_idx.numel():
        raise UnmaskError(f"held_out: {cfg.held_out} of {len(states.groups.unique())} puzzles "
                          "leaves one side empty; use more puzzles")
    per_epoch = math.ceil(len(train_idx) / cfg.batch_size)
    loop = LoopConfig(total_steps=per_epoch * cfg.max_epochs, lr=cfg.lr, min_lr=0.1 * cfg.lr,
                      eval_every=per_epoch, metric="held_out_loss", patience=cfg.patience,
                      max_time_s=cfg.max_time_s, steps_per_epoch=per_epoch)
    n_test = max(1, int(states.decoded[test_idx].sum()))

    def step(i: int) -> torch.Tensor:
        epoch, k = divmod(i, per_epoch)
        order = train_idx[_epoch_order(len(train_idx), cfg.seed, epoch)]
        batch = order[k * cfg.batch_size:(k + 1) * cfg.batch_size]
        return _bce(corrector, feats, states, batch) / max(1, int(states.decoded[batch].sum()))

    def evaluate(_) -> dict:
        with torch.no_grad():
            return {"held_out_loss": sum(float(_bce(corrector, feats, states, test_idx[i:i + 256]))
                                         for i in range(0, len(test_idx), 256)) / n_test}

    def save_best(record: dict, meta: dict) -> None:
        corrector.save(out / "best", extra={
            "train": record, "split": {"held_out": cfg.held_out, "seed": cfg.seed}, **cfg.extra})

    opt = torch.optim.AdamW(corrector.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    res = fit(step, evaluate, loop, out, model=corrector, optimizer=opt, save_best=save_best,
              resume=resume, override=override, overwrite=overwrite,
              identity={"corrector_config": corrector.config},
              settings={"train_config": cfg, **({"data": data} if data is not None else {})},
              log=log)
    best_head = Corrector.load(out / "best")
    sub = DecodedStates(*(t[test_idx] for t in (states.tokens, states.wrong, states.decoded,
                                                states.groups)))
    metrics = corrector_metrics(predict_wrong(best_head, feats[test_idx]), sub)
    return {"best_epoch": math.ceil(res.best_step / per_epoch), "held_out_loss": res.best,
            **metrics}
