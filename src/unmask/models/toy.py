"""An MDM whose conditionals are exact: computed by enumeration from a joint table.

It is the ground truth for tests: marginals, the chain of conditionals and conditional mutual
information are all known analytically.
"""

from __future__ import annotations

import itertools

import numpy as np
import torch

from unmask.errors import UnmaskError
from unmask.models.base import MaskedModel, ModelOutput, ordered_masked_pairs


class ExactJointMDM(MaskedModel):
    """Exact masked model over sequences of length N on V real tokens (ids 0..V-1, MASK = V).

    For a masked position i, ``softmax(logits[b, i])`` equals p(x_i | revealed positions of b)
    under ``joint`` (marginalising the other masked positions). Revealed positions get a
    one-hot distribution on their own token. Hidden states are one-hot token embeddings
    (B, N, V + 1).

    joint: (V,) * N tensor of probabilities (summing to 1), or None for a random one.
    """

    def __init__(self, joint: torch.Tensor | None = None, *, n: int = 5, v: int = 3,
                 seed: int = 0, concentration: float = 0.5):
        super().__init__()
        if joint is None:
            # A Dirichlet draw: concentration < 1 gives peaked, strongly dependent joints.
            draw = np.random.default_rng(seed).gamma(concentration, size=(v,) * n)
            joint = torch.from_numpy(draw / draw.sum())
        joint = joint.double()
        if joint.dim() < 1 or len(set(joint.shape)) != 1:
            raise UnmaskError(f"joint: expected shape (V,)*N, got {tuple(joint.shape)}")
        if (joint < 0).any() or abs(float(joint.sum()) - 1.0) > 1e-6:
            raise UnmaskError("joint: expected non-negative probabilities summing to 1")
        joint = joint / joint.sum()  # exact normalisation in float64
        self.n = joint.dim()
        self.v = joint.shape[0]
        self.vocab_size = self.v + 1
        self.mask_id = self.v
        self.max_length = self.n
        self.hidden_size = self.v + 1
        self.real_token_ids = tuple(range(self.v))
        states = torch.tensor(list(itertools.product(range(self.v), repeat=self.n)))
        self.register_buffer("joint", joint)
        self.register_buffer("states", states)  # (S, N), S = V**N, same order as joint.flatten()
        self.register_buffer("probs", joint.flatten())  # (S,)

    def posterior_weights(self, tokens: torch.Tensor) -> torch.Tensor:
        """(B, S) unnormalised weight of each full state consistent with the revealed tokens."""
        revealed = tokens != self.mask_id  # (B, N)
        agree = self.states[None] == tokens[:, None, :]  # (B, S, N)
        consistent = (agree | ~revealed[:, None, :]).all(-1)  # (B, S)
        return self.probs[None] * consistent

    def conditionals(self, tokens: torch.Tensor) -> torch.Tensor:
        """(B, N, V) exact p(x_i = v | revealed) for every position (one-hot where revealed)."""
        w = self.posterior_weights(tokens)  # (B, S)
        total = w.sum(-1, keepdim=True)
        if (total <= 0).any():
            raise UnmaskError("tokens: revealed tokens have zero probability under the joint")
        onehot = torch.nn.functional.one_hot(self.states, self.v).double()  # (S, N, V)
        return torch.einsum("bs,snv->bnv", w / total, onehot)

    def forward(self, tokens: torch.Tensor, output_hidden_layers: bool = False) -> ModelOutput:
        p = self.conditionals(tokens)  # (B, N, V)
        logits = torch.full((*tokens.shape, self.vocab_size), -torch.inf, dtype=torch.float64,
                            device=tokens.device)
        logits[..., : self.v] = p.clamp_min(1e-300).log()
        logits[..., : self.v] = torch.where(p > 0, logits[..., : self.v], -torch.inf)
        hidden = torch.nn.functional.one_hot(tokens, self.vocab_size).double()
        return ModelOutput(logits=logits, hidden=hidden,
                           hidden_layers=(hidden,) if output_hidden_layers else None)

    def conditional_mi(self, tokens: torch.Tensor) -> torch.Tensor:
        """(B, N, N) analytic I(X_i; X_j | revealed) in nats; zero on the diagonal and on
        revealed positions."""
        w = self.posterior_weights(tokens)
        w = w / w.sum(-1, keepdim=True)  # (B, S)
        onehot = torch.nn.functional.one_hot(self.states, self.v).double()  # (S, N, V)
        pair = torch.einsum("bs,siv,sjw->bijvw", w, onehot, onehot)  # (B, N, N, V, V)
        marg = torch.einsum("bs,snv->bnv", w, onehot)  # (B, N, V)
        indep = marg[:, :, None, :, None] * marg[:, None, :, None, :]
        ratio = torch.where(pair > 0, pair / indep.clamp_min(1e-300), torch.ones_like(pair))
        mi = (pair * ratio.log()).sum((-1, -2))
        keep = ordered_masked_pairs(tokens == self.mask_id)
        return torch.where(keep, mi, torch.zeros_like(mi))


class FixedOutputModel(MaskedModel):
    """A model whose every pass returns the same outputs whatever the tokens: fixed random
    logits (N, V) and hidden states (N, D), expanded to the batch at no cost (for measuring
    the decode loop and the samplers without a model).

    n: positions; v: real tokens (ids 0..v-1, MASK = v); hidden: D; layers: hidden layers
    (and attention layers) returned when asked; sharpness: scale of the logits (larger: more
    confident proposals, so rules with thresholds reveal more per pass).
    """

    def __init__(self, *, n: int = 81, v: int = 9, hidden: int = 16, layers: int = 2,
                 heads: int = 2, sharpness: float = 3.0, seed: int = 0):
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        self.n, self.v = n, v
        self.vocab_size, self.mask_id, self.max_length = v + 1, v, n
        self.hidden_size = hidden
        self.real_token_ids = tuple(range(v))
        logits = torch.randn(n, v + 1, generator=g) * sharpness
        logits[:, v] = -1e4  # MASK is never proposed
        self.register_buffer("logits", logits)
        self.register_buffer("hidden", torch.randn(n, hidden, generator=g))
        self.register_buffer("attention", torch.softmax(torch.randn(heads, n, n, generator=g),
                                                        -1))
        self.layers = layers

    @property
    def supports_attentions(self) -> bool:
        return True

    @property
    def supports_logits_positions(self) -> bool:
        return True

    def forward(self, tokens: torch.Tensor, output_hidden_layers: bool = False,
                output_attentions: bool = False, logits_positions: slice | None = None
                ) -> ModelOutput:
        b, n = tokens.shape
        cols = logits_positions or slice(0, n)
        hidden = self.hidden[None, :n].expand(b, -1, -1)
        layers = (hidden,) * (self.layers + 1) if output_hidden_layers else None
        att = ((self.attention[None, :, :n, :n].expand(b, -1, -1, -1),) * self.layers
               if output_attentions else None)
        return ModelOutput(logits=self.logits[None, cols].expand(b, -1, -1),
                           hidden=hidden[:, cols], hidden_layers=layers, attentions=att)
