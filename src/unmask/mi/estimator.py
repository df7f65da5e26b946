"""Neural pairwise MI estimator: a small head on an MDM's frozen hidden states.

Ground-truth MI by perturbation probing costs 1 + |M||V| sequences per context; this head
predicts the whole (B, N, N) matrix from the hidden states (B, N, D) of the one forward pass the
decoder already makes.

Architecture (about 0.1M parameters at the defaults):

    f (B, N, F) -> Linear(F, d) + GELU -> ``mixer_layers`` pre-LN transformer blocks (d)
    for each of U pair units: z_u(i, j) = q_i^u . k_j^u + b_u   (q^u, k^u: linear maps d -> r)
    [two-hop units, h < H: y_h(i, j) = sum_{k masked} a_h(i, k) a_h(k, j) / N,  a_h = act(z_h)]
    M_ij = softplus(sum_u w_u act(z_u(i, j)) [+ sum_h v_h y_h(i, j)] + c [+ P_ij])
    M <- (M + M^T) / 2;  diagonal 0

with P an optional learned table over pairs of positions (``pair_prior_length``) and H
optional two-hop units (``two_hop``): a pair's score also sums, over the masked positions k
between them, the product of its two legs, which is how dependence reaches two positions that
share no constraint (in Sudoku, non-peers linked through common peers). One batched (N, N)
matmul per unit.

The features f are the frozen hidden states (F = D), optionally followed by the model's own
marginals from the same pass: the K real-token probabilities and their entropy (F = D + K + 1,
``marginal_size = K``). The marginals are a fixed function of the final hidden states, but not
one a small head learns easily: two cells share information only where their marginals overlap
(in Sudoku, peers split between the same two digits), which is one bilinear form p_i^T A p_j on
the probabilities and hard to recover from the pre-softmax geometry of the hidden states.

This is the "pair feature q_i * k_j (Hadamard) -> MLP -> softplus" head: the first MLP layer on
a Hadamard feature is a set of bilinear forms q_i^T diag(w_u) k_j, here each of rank r with its
own projections. Written this way the pair stage is one batched matmul into (B, U, N, N) plus
one reduction, and never materialises a (B, N, N, d) tensor, whose memory traffic made the
literal form cost more than the MDM's own forward pass on CPU.

An estimator belongs to one MDM: its config records the MDM's :meth:`fingerprint`, and
loading or running it against another model raises :class:`UnmaskError`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from unmask.errors import UnmaskError, require
from unmask.frozen_head import FrozenHead, load_frozen_head, marginal_features, mixer_blocks
from unmask.models.base import MaskedModel, ordered_masked_pairs
from unmask.pretrained import shipped_head
from unmask.validation import is_int

MODEL_TYPE = "mi-estimator"
#: pair-stage elements (B x U x N x N) up to which :meth:`MIEstimator.forward` computes every
#: pair even when asked for some rows only (:meth:`MIEstimator.all_pairs_cheaper`)
ALL_PAIRS_ELEMENTS = 1 << 26
WEIGHTS_FILE = "estimator.safetensors"


@dataclass
class EstimatorConfig:
    """Shape of an :class:`MIEstimator` and the MDM it reads.

    hidden_size: D, the width of the MDM hidden states read.
    layer: which hidden states: None = the model's final hidden states (``ModelOutput.hidden``);
        an int indexes ``ModelOutput.hidden_layers`` (0 = embeddings, negative from the end).
    extra_layers: further ``hidden_layers`` indices whose states are concatenated after those
        of ``layer``, in this order (F grows by D for each); () = none.
    d: width of the adapter, mixer and q/k projections.
    n_heads: attention heads of the mixer blocks.
    mixer_layers: transformer blocks after the adapter (0 = none).
    pair_hidden: hidden units U of the pair MLP (its cost grows as N^2 x U: this is what
        bounds the estimator's share of a forward pass).
    pair_rank: rank r of each unit's bilinear form q_i^u . k_j^u (see the module docstring).
    activation: 'relu' or 'gelu' in the pair MLP (relu is cheaper on the N^2 pair tensor).
    pair_prior_length: L > 0 adds a learned symmetric (L, L) table to every pair's logit, a
        prior per pair of positions for models whose positions have a fixed meaning (Sudoku
        cells: it learns the row/column/box peers from few labels); inputs longer than L are
        refused. 0 = none (positions are known only through the hidden states).
    marginal_size: K > 0 also reads the model's marginals over its K real tokens and their
        entropy (see the module docstring); K must equal ``len(model.real_token_ids)``.
        0 = hidden states only.
    two_hop: H, how many of the pair units (the first H, H <= pair_hidden) are also composed
        with themselves over the masked positions (see the module docstring); 0 = none.
    entropy_gate: bound every pair by the smaller of its two marginal entropies,
        M_ij = sigmoid(logit_ij) * min(H_i, H_j) instead of softplus(logit_ij): the bound
        I(X_i; X_j) <= min(H(X_i), H(X_j)) holds by construction and a pair with a
        near-certain cell gets near-zero MI whatever the logit. Needs ``marginal_size``
        (the entropies are the last feature).
    model_fingerprint: :meth:`MaskedModel.fingerprint` of the MDM the estimator was trained on
        ("" = not tied to a model yet: only the hidden size is checked).
    """

    hidden_size: int
    layer: int | None = None
    extra_layers: tuple[int, ...] = ()
    d: int = 64
    n_heads: int = 4
    mixer_layers: int = 1
    pair_hidden: int = 8
    pair_rank: int = 16
    activation: str = "relu"
    pair_prior_length: int = 0
    marginal_size: int = 0
    two_hop: int = 0
    entropy_gate: bool = False
    model_fingerprint: str = ""

    def __post_init__(self):
        require(is_int(self.hidden_size) and self.hidden_size >= 1,
                f"hidden_size: must be an integer >= 1, got {self.hidden_size!r}")
        require(self.layer is None or is_int(self.layer),
                f"layer: must be None or an integer, got {self.layer!r}")
        require(isinstance(self.extra_layers, (tuple, list))
                and all(is_int(x) for x in self.extra_layers),
                f"extra_layers: must be a sequence of integers, got {self.extra_layers!r}")
        self.extra_layers = tuple(self.extra_layers)  # a JSON config gives a list
        require(self.d >= 1 and self.pair_hidden >= 1 and self.pair_rank >= 1,
                "d, pair_hidden, pair_rank: must be >= 1")
        require(self.activation in ("relu", "gelu"),
                f"activation: expected 'relu' or 'gelu', got {self.activation!r}")
        require(self.pair_prior_length >= 0,
                f"pair_prior_length: must be >= 0, got {self.pair_prior_length}")
        require(self.mixer_layers >= 0, f"mixer_layers: must be >= 0, got {self.mixer_layers}")
        require(is_int(self.marginal_size) and self.marginal_size >= 0,
                f"marginal_size: must be an integer >= 0, got {self.marginal_size!r}")
        require(is_int(self.two_hop) and 0 <= self.two_hop <= self.pair_hidden,
                f"two_hop: must be an integer in [0, pair_hidden={self.pair_hidden}], got "
                f"{self.two_hop!r}")
        require(not self.entropy_gate or self.marginal_size > 0,
                "entropy_gate: needs the marginals (marginal_size > 0), whose entropies bound "
                "each pair")
        require(self.d % self.n_heads == 0,
                f"d: {self.d} is not divisible by n_heads={self.n_heads}")

    @property
    def reads_hidden_layers(self) -> bool:
        """Whether the features need ``ModelOutput.hidden_layers`` (not just the final states)."""
        return self.layer is not None or bool(self.extra_layers)

    @property
    def feature_size(self) -> int:
        """F, the width of the features the head reads: D per layer read (``layer`` and each
        of ``extra_layers``), plus K + 1 with marginals."""
        return (self.hidden_size * (1 + len(self.extra_layers))
                + (self.marginal_size + 1 if self.marginal_size else 0))


def select_hidden(output, layer: int | None) -> torch.Tensor:
    """Hidden states (B, N, D) of a :class:`ModelOutput`: the final ones (``layer`` None) or
    ``hidden_layers[layer]`` (0 = embeddings, negative from the end)."""
    if layer is None:
        return output.hidden
    if output.hidden_layers is None:
        raise UnmaskError(f"layer: estimator reads hidden layer {layer}; run the model "
                          "with output_hidden_layers=True")
    n_layers = len(output.hidden_layers)
    if not -n_layers <= layer < n_layers:
        raise UnmaskError(f"layer: {layer} is outside the model's {n_layers} hidden layers")
    return output.hidden_layers[layer]


def estimator_features(output, model: MaskedModel, config: EstimatorConfig) -> torch.Tensor:
    """(B, N, F) features of a :class:`ModelOutput` of ``model`` for an estimator of
    ``config``: the selected hidden states (those of ``layer``, then of each of
    ``extra_layers``), then (with ``marginal_size`` K) the K real-token probabilities and their
    entropy in nats."""
    hidden = select_hidden(output, config.layer)
    if config.extra_layers:
        hidden = torch.cat([hidden] + [select_hidden(output, x) for x in config.extra_layers],
                           dim=-1)
    if not config.marginal_size:
        return hidden

    real = list(model.real_token_ids)
    if len(real) != config.marginal_size:
        raise UnmaskError(f"model: {len(real)} real tokens, but the estimator reads marginals "
                          f"over {config.marginal_size}")
    marginals = marginal_features(output.logits, torch.tensor(real, device=output.logits.device))
    return torch.cat([hidden.float(), marginals], dim=-1).to(hidden.dtype)


class MIEstimator(FrozenHead):
    """hidden (B, N, D) -> MI (B, N, N): symmetric, non-negative, zero diagonal, in nats.
    Saved as ``config.json`` + ``estimator.safetensors``, tied to one MDM (see
    :class:`~unmask.frozen_head.FrozenHead`)."""

    MODEL_TYPE = MODEL_TYPE
    WEIGHTS_FILE = WEIGHTS_FILE
    KIND = "estimator"
    CONFIG_CLASS = EstimatorConfig

    def __init__(self, config: EstimatorConfig):
        super().__init__()
        self.config = config
        d = config.d
        self.adapter = nn.Linear(config.feature_size, d)
        self.mixer = mixer_blocks(d, config.n_heads, config.mixer_layers)
        self.norm = nn.LayerNorm(d)
        u, r = config.pair_hidden, config.pair_rank
        self.query = nn.Linear(d, u * r)
        self.key = nn.Linear(d, u * r)
        self.pair_bias = nn.Parameter(torch.zeros(u))
        self.out = nn.Linear(u + config.two_hop, 1)
        length = config.pair_prior_length
        self.pair_prior = nn.Parameter(torch.zeros(length, length)) if length else None
        # start near MI ~ 0 (softplus(-4) ~ 0.018): most pairs carry little information
        nn.init.constant_(self.out.bias, -4.0)

    def forward(self, hidden: torch.Tensor, masked: torch.Tensor | None = None,
                rows: torch.Tensor | None = None) -> torch.Tensor:
        """MI (B, N, N) from features (B, N, F) (see :meth:`features`; F = D without
        marginals).

        masked: optional (B, N) bool; pairs that are not both masked get 0 (revealed positions
        carry no conditional information).
        rows: optional (B, N) bool, the positions whose pairs are wanted; pairs with neither end
            in ``rows`` get 0. Without two-hop units, on inputs too large for every pair to be
            cheaper (:meth:`all_pairs_cheaper`), only those pairs are computed: the pair stage
            then costs about 2K/N of the full one, K the most positions a row asks for.
        """
        b, n = hidden.shape[:2]
        for name, t in (("masked", masked), ("rows", rows)):
            if t is not None and t.shape != (b, n):
                raise UnmaskError(f"{name}: expected shape {(b, n)}, got {tuple(t.shape)}")
        e = self.embed(hidden)
        ent = hidden[..., -1].to(e.device, e.dtype).clamp(min=0) if self.config.entropy_gate \
            else None  # (B, N) the marginal entropies, which bound each pair
        if rows is None or self.config.two_hop or self.all_pairs_cheaper(b, n):
            m = self._all_pairs(e, masked, ent)
            return m if rows is None else m * (rows[:, :, None] | rows[:, None, :]).to(m.device)
        rows = rows.to(e.device)
        k = int(rows.sum(1).max())  # read back: worth it on large inputs only
        if 2 * k >= n:
            return self._all_pairs(e, masked, ent) * (rows[:, :, None] | rows[:, None, :])
        index = rows.float().topk(k, dim=1).indices  # (B, K) each row's asked positions first
        return self._pairs_of(e, masked, ent, index, rows.gather(1, index))

    def all_pairs_cheaper(self, b: int, n: int) -> bool:
        """Whether every pair is computed when some rows are asked for (``rows``): when the
        pair stage of all pairs, B x U x N x N elements, is at most :data:`ALL_PAIRS_ELEMENTS`,
        it costs less than learning how many rows the batch asks for, which reads a number
        back from the device and stalls its queue."""
        return b * self.config.pair_hidden * n * n <= ALL_PAIRS_ELEMENTS

    def _all_pairs(self, e: torch.Tensor, masked: torch.Tensor | None,
                   ent: torch.Tensor | None) -> torch.Tensor:
        """(B, N, N) MI of every pair from embedded features e (B, N, d) (``ent``: (B, N)
        marginal entropies for the entropy gate, else None)."""
        z = self._units(e, e)  # (B, U, N, N)
        b, u, n, _ = z.shape
        m = self._unit_logits(z)
        h = self.config.two_hop
        if h:
            legs = z[:, :h]
            if masked is not None:
                legs = legs * masked.to(z.device, z.dtype).view(b, 1, 1, n)
            y = torch.matmul(legs, z[:, :h]) * (1.0 / n)  # (B, H, N, N)
            v = self.out.weight[:, u:].expand(b, 1, h)
            m = m + torch.bmm(v, y.reshape(b, h, n * n)).view(b, n, n)
        prior = self._prior(n)
        m = self._pair_mi(m if prior is None else m + prior, _gate(ent, None))
        m = 0.5 * (m + m.transpose(1, 2))
        if masked is None:
            return m * ~torch.eye(n, dtype=torch.bool, device=m.device)
        return m * ordered_masked_pairs(masked.to(m.device))

    def _pairs_of(self, e: torch.Tensor, masked: torch.Tensor | None,
                  ent: torch.Tensor | None, index: torch.Tensor, asked: torch.Tensor
                  ) -> torch.Tensor:
        """(B, N, N) MI of the pairs with an end in ``index`` (B, K) where ``asked`` (B, K)
        (0 elsewhere): the rows i = index[b, k] of :meth:`_all_pairs`, from the ordered pairs
        (i, j) and (j, i)."""
        b, n, d = e.shape
        e_k = e.gather(1, index[..., None].expand(-1, -1, d))  # (B, K, d)
        prior = self._prior(n)
        prior = 0 if prior is None else prior[index]  # (B, K, N)
        gate = _gate(ent, index)
        m_out = self._pair_mi(self._unit_logits(self._units(e_k, e)) + prior, gate)
        m_in = self._pair_mi(self._unit_logits(self._units(e, e_k)).transpose(1, 2) + prior,
                             gate)
        r = 0.5 * (m_out + m_in)  # (B, K, N)
        keep = (index[..., None] != torch.arange(n, device=e.device)) & asked[..., None]
        if masked is not None:
            masked = masked.to(e.device)
            keep = keep & masked.gather(1, index)[..., None] & masked[:, None, :]
        m = torch.zeros(b, n, n, dtype=r.dtype, device=r.device)
        m.scatter_(1, index[..., None].expand(-1, -1, n), r * keep)
        return torch.maximum(m, m.transpose(1, 2))  # the columns of the rows (MI >= 0)

    def embed(self, hidden: torch.Tensor) -> torch.Tensor:
        """(B, N, d) the per-position embedding of features (B, N, F) that the pair units read."""
        if hidden.dim() != 3 or hidden.shape[-1] != self.config.feature_size:
            raise UnmaskError(f"hidden: expected features of shape (B, N, "
                              f"{self.config.feature_size}), got {tuple(hidden.shape)}")
        a = F.gelu(self.adapter(hidden.to(self.adapter.weight.dtype)))
        for blk in self.mixer:
            a = blk(a)
        return self.norm(a)

    def _units(self, e_i: torch.Tensor, e_j: torch.Tensor) -> torch.Tensor:
        """(B, U, I, J) the pair units act(q_i^u . k_j^u + b_u) of embeddings e_i (B, I, d)
        (queries) and e_j (B, J, d) (keys)."""
        b, ni, _ = e_i.shape
        nj = e_j.shape[1]
        u, r = self.config.pair_hidden, self.config.pair_rank
        q = self.query(e_i).view(b, ni, u, r).transpose(1, 2)  # (B, U, I, r)
        k = self.key(e_j).view(b, nj, u, r).transpose(1, 2)  # (B, U, J, r)
        # z[b, u, i, j] = q_i^u . k_j^u + bias_u as one batched matmul: the bias rides on an
        # extra constant-1 channel so no separate pass over the (B, U, I, J) tensor is needed
        q = torch.cat([q, self.pair_bias.view(1, u, 1, 1).expand(b, u, ni, 1)], -1)
        k = torch.cat([k, k.new_ones(b, u, nj, 1)], -1)
        z = torch.matmul(q, k.transpose(-1, -2))  # (B, U, I, J)
        return F.gelu(z) if self.config.activation == "gelu" else F.relu_(z)

    def _unit_logits(self, z: torch.Tensor) -> torch.Tensor:
        """(B, I, J) the pair logits sum_u w_u z_u + c of pair units z (B, U, I, J)."""
        b, u, ni, nj = z.shape
        # contract the units with (1, U) @ (B, U, I*J): no permute of the pair tensor
        w = self.out.weight[:, :u].expand(b, 1, u)
        return torch.bmm(w, z.reshape(b, u, ni * nj)).view(b, ni, nj) + self.out.bias

    def _prior(self, n: int) -> torch.Tensor | None:
        """(N, N) the symmetrised learned pair table, or None without one."""
        if self.pair_prior is None:
            return None
        if n > self.config.pair_prior_length:
            raise UnmaskError(f"hidden: {n} positions exceed the estimator's pair prior of "
                              f"{self.config.pair_prior_length}")
        prior = self.pair_prior[:n, :n]
        return 0.5 * (prior + prior.T)

    @staticmethod
    def _pair_mi(logits: torch.Tensor, gate: torch.Tensor | None) -> torch.Tensor:
        """Non-negative MI of ordered pairs from their logits: softplus, or with the entropy
        gate sigmoid(logit) * min(H_i, H_j)."""
        return F.softplus(logits) if gate is None else torch.sigmoid(logits) * gate

    def pair_units(self, hidden: torch.Tensor) -> torch.Tensor:
        """(B, U, N, N) the pair units act(q_i^u . k_j^u + b_u) of features (B, N, F), before
        they are weighted, summed and symmetrised by :meth:`forward`."""
        e = self.embed(hidden)
        return self._units(e, e)

    # -- the MDM it belongs to -------------------------------------------------------------

    def features(self, output, model: MaskedModel) -> torch.Tensor:
        """The features (B, N, F) this estimator reads from ``model``'s :class:`ModelOutput`."""
        return estimator_features(output, model, self.config)


def _gate(ent: torch.Tensor | None, index: torch.Tensor | None) -> torch.Tensor | None:
    """(B, I, N) the entropy gate min(H_i, H_j) of rows i (every position, or ``index``
    (B, K)) from marginal entropies ent (B, N); None without the gate."""
    if ent is None:
        return None
    rows = ent if index is None else ent.gather(1, index)
    return torch.minimum(rows[:, :, None], ent[:, None, :])


def needs_hidden_layers(estimator: MIEstimator) -> bool:
    """Whether the model must be run with ``output_hidden_layers=True`` for ``estimator``."""
    return estimator.config.reads_hidden_layers


def estimate_mi(model: MaskedModel, estimator: MIEstimator, tokens: torch.Tensor,
                output=None) -> torch.Tensor:
    """Estimated MI (B, N, N) of ``tokens`` (B, N) under ``model``, zero off masked pairs.

    output: the model's :class:`ModelOutput` on ``tokens`` when the caller already has it
    (a decoder does), so no second forward pass is made.
    """
    estimator.check_model(model)
    if output is None:
        model.check_tokens(tokens)
        with torch.inference_mode():
            output = model(tokens, output_hidden_layers=needs_hidden_layers(estimator))
    with torch.inference_mode():
        return estimator(estimator.features(output, model), tokens == model.mask_id)


#: the estimator shipped for the default shipped model (a folder under unmask/pretrained/)
SHIPPED_ESTIMATOR = shipped_head(MIEstimator.KIND)


def load_estimator(name_or_path: str | Path | None = None,
                   model: MaskedModel | None = None) -> MIEstimator:
    """Load an estimator from a folder or by shipped name (default: the one shipped for
    ``model``'s task, :func:`unmask.pretrained.shipped_head`); with ``model``, raise unless
    it was trained on that model."""
    return load_frozen_head(MIEstimator, name_or_path or shipped_head(MIEstimator.KIND, model),
                            model=model)

