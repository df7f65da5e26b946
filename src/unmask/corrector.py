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

import json
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from unmask.errors import UnmaskError, require
from unmask.frozen_head import FrozenHead, frozen_features, load_frozen_head, mixer_blocks
from unmask.mi.estimator_train import held_out_mask, rankdata
from unmask.models.base import MaskedModel, ModelOutput

#: the corrector shipped for the shipped Sudoku MDM (a folder under unmask/pretrained/)
SHIPPED_CORRECTOR = "sudoku_corrector"


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
        require(isinstance(self.hidden_size, int) and self.hidden_size >= 1,
                f"hidden_size: must be an integer >= 1, got {self.hidden_size!r}")
        require(isinstance(self.vocab_size, int) and self.vocab_size >= 2,
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

    def features(self, output: ModelOutput, tokens: torch.Tensor) -> torch.Tensor:
        """(B, N, F) what the head reads of a pass ``output`` on ``tokens`` (B, N)."""
        from unmask.decode import entropy_from_log_probs

        cfg = self.config
        if output.hidden.shape[-1] != cfg.hidden_size or output.logits.shape[-1] != cfg.vocab_size:
            raise UnmaskError(f"output: expected hidden size {cfg.hidden_size} and "
                              f"{cfg.vocab_size} logits, got {output.hidden.shape[-1]} and "
                              f"{output.logits.shape[-1]}")
        log_p = torch.log_softmax(output.logits[..., cfg.real_token_ids].float(), dim=-1)
        ent = entropy_from_log_probs(log_p).unsqueeze(-1)
        one_hot = F.one_hot(tokens.to(output.logits.device), cfg.vocab_size).float()
        return torch.cat([output.hidden.float(), log_p.exp(), ent, one_hot], dim=-1)

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
    """Load a corrector from a folder or by shipped name (default: the Sudoku corrector);
    with ``model``, raise unless it was trained on that model."""
    return load_frozen_head(Corrector, name_or_path or SHIPPED_CORRECTOR, model=model)


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


def load_decoded_states(path: str | Path) -> tuple[dict, DecodedStates]:
    """The states file ``unmask train corrector`` keeps (OUT/states.pt): its key (the model's
    fingerprint, the puzzle pool's size and seed, the samplers) and the states."""
    saved = torch.load(path)
    return saved["key"], DecodedStates(**saved["states"])


def decoded_states(model: MaskedModel, inputs: torch.Tensor, answers: torch.Tensor,
                   samplers: Sequence, *, seed: int = 0,
                   progress: Callable[[int], None] | None = None) -> DecodedStates:
    """Decode ``inputs`` (P, N) (answers (P, N)) and keep every state the loop passed through,
    each sampler decoding its own share of the rows (so the states cover several degrees of
    parallelism); a state is kept once (steps where a finished row stands still are not)."""
    from unmask.decode import DecodeConfig, decode
    from unmask.samplers import make_sampler

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

def roc_auc(scores: torch.Tensor, labels: torch.Tensor) -> float:
    """Area under the ROC curve of ``scores`` (n,) for bool ``labels`` (n,) (ties: average
    ranks); nan when one class is absent."""
    pos = int(labels.sum())
    neg = len(labels) - pos
    if not pos or not neg:
        return math.nan
    ranks = rankdata(scores.double())
    return float((ranks[labels].sum() - pos * (pos + 1) / 2) / (pos * neg))


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


def train_corrector(corrector: Corrector, feats: torch.Tensor, states: DecodedStates,
                    cfg: CorrectorTrainConfig, out_dir: str | Path,
                    log: Callable[[str], None] = print) -> dict:
    """Train on precomputed ``feats`` (M, N, F) of ``states``; the best held-out corrector is
    saved to ``out_dir/best`` and one line per epoch appended to ``out_dir/history.jsonl``.
    Returns the held-out metrics of the best epoch."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    test = held_out_mask(states.groups, cfg.held_out, cfg.seed)
    train_idx, test_idx = (~test).nonzero().squeeze(1), test.nonzero().squeeze(1)
    if not train_idx.numel() or not test_idx.numel():
        raise UnmaskError(f"held_out: {cfg.held_out} of {len(states.groups.unique())} puzzles "
                          "leaves one side empty; use more puzzles")
    gen = torch.Generator().manual_seed(cfg.seed)
    opt = torch.optim.AdamW(corrector.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    steps_per_epoch = math.ceil(len(train_idx) / cfg.batch_size)
    total = steps_per_epoch * cfg.max_epochs
    n_test = max(1, int(states.decoded[test_idx].sum()))
    best, best_epoch, start, step = math.inf, -1, time.perf_counter(), 0
    history = out / "history.jsonl"
    history.unlink(missing_ok=True)
    for epoch in range(1, cfg.max_epochs + 1):
        corrector.train()
        order = train_idx[torch.randperm(len(train_idx), generator=gen)]
        for lo in range(0, len(order), cfg.batch_size):
            batch = order[lo:lo + cfg.batch_size]
            for g in opt.param_groups:
                g["lr"] = cfg.lr * (0.1 + 0.45 * (1 + math.cos(math.pi * step / total)))
            n = max(1, int(states.decoded[batch].sum()))
            loss = _bce(corrector, feats, states, batch) / n
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            step += 1
        corrector.eval()
        with torch.no_grad():
            held = sum(float(_bce(corrector, feats, states, test_idx[i:i + 256]))
                       for i in range(0, len(test_idx), 256)) / n_test
        record = {"epoch": epoch, "step": step, "held_out_loss": held,
                  "wall_s": round(time.perf_counter() - start, 1), "best": held < best}
        with open(history, "a") as f:
            f.write(json.dumps(record) + "\n")
        log(" ".join(f"{k}={v:.5g}" if isinstance(v, float) else f"{k}={v}"
                     for k, v in record.items()))
        if held < best:
            best, best_epoch = held, epoch
            corrector.save(out / "best", extra={
                "train": record, "split": {"held_out": cfg.held_out, "seed": cfg.seed},
                **cfg.extra})
        if epoch - best_epoch >= cfg.patience:
            break
        if cfg.max_time_s is not None and time.perf_counter() - start > cfg.max_time_s:
            break
    best_head = Corrector.load(out / "best")
    sub = DecodedStates(*(t[test_idx] for t in (states.tokens, states.wrong, states.decoded,
                                                states.groups)))
    metrics = corrector_metrics(predict_wrong(best_head, feats[test_idx]), sub)
    return {"best_epoch": best_epoch, "held_out_loss": best, **metrics}
