"""The token automaton as a :class:`~unmask.constraints.base.Constraint`: exact canvas
feasibility by forward and backward state sets, vectorised over the batch on the model's
device.

Over a canvas of N positions, F[i] (R, S) is the set of automaton states some completion of
positions < i can be in at i, and B[i] the states from which positions >= i can be completed
to an accepting state: a committed token moves a set through its column of the transition
table, a masked position through the state adjacency (any token the model may emit), a
position outside the constrained text leaves it as it is. A token t is allowed at a masked
position i exactly when some s in F[i] has delta(s, t) in B[i + 1]; the canvas is feasible
when F[N] holds an accepting state. Cost per pass: O(N) steps of (R, S) x (S, S) products,
and (R, W, S, C) work for the allowed tokens (C token classes: tokens that move every state
alike), chunked.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import torch

from unmask.constraints.compile import TokenDFA, compile_dfa, spelling
from unmask.constraints.spec import ConstraintSpec
from unmask.errors import UnmaskError, require

#: elements of one (positions, S, C) chunk of the allowed-token computation
_CHUNK = 1 << 24


class DFAConstraint:
    """The language of ``spec`` (or of ``spec[r]`` for row r, None: no constraint) over the
    model's tokenizer, on the positions ``span`` (a (B, N) bool tensor, or None: every
    position) of each row; other positions are not part of the text (a prompt, PAD, special
    tokens) and are skipped. ``pad``: EOS may end the text early (else it fills the span
    exactly). Exact: a canvas it allows can
    always be completed, and every completed text (the decode of the span's tokens up to the
    first EOS) is in the language."""

    def __init__(self, spec: ConstraintSpec | list[ConstraintSpec | None],
                 span: torch.Tensor | None = None, pad: bool = True):
        specs = spec if isinstance(spec, (list, tuple)) else None
        for one in (specs or [spec]):
            require(one is None and specs is not None or isinstance(one, ConstraintSpec),
                    f"constraint: expected a ConstraintSpec (or one per row, None for a row "
                    f"without), got {type(one).__name__}")
        self.spec, self.specs, self.span, self.pad = spec, specs, span, pad
        self.dfa: TokenDFA | None = None

    def compile(self, model, spec: ConstraintSpec) -> TokenDFA:
        """The automaton of ``spec`` over ``model``'s tokenizer (cached)."""
        tokenizer = getattr(model, "tokenizer", None)
        require(tokenizer is not None, f"{spec.kind}: the model has no tokenizer to spell "
                                       "its tokens; constraints need a text model")
        real = model.real_token_mask.tolist()
        key = (id(tokenizer), len(real), tuple(getattr(model, "eos_ids", ())))
        spell = _SPELLINGS.get(key)
        if spell is None or spell[0] is not tokenizer:
            spell = (tokenizer, spelling(tokenizer, len(real), real, key[2]))
            _SPELLINGS[key] = spell
        return compile_dfa(spec, spell[1] if self.pad
                           else dataclasses.replace(spell[1], eos_ids=()))

    def prepare(self, model, tokens):
        b = tokens.shape[0]
        specs = self.specs if self.specs is not None else [self.spec] * b
        require(len(specs) == b, f"constraint: {len(specs)} constraints for {b} rows")
        unique = list(dict.fromkeys(s for s in specs if s is not None))
        dfas = [self.compile(model, s) for s in unique]
        self.dfa = dfas[0] if len(dfas) == 1 and None not in specs else None
        delta, token_class, accept, starts = merge(dfas, model.vocab_size)
        which = [len(unique) if s is None else unique.index(s) for s in specs]
        device = tokens.device
        self.mask_id = model.mask_id
        self.delta = torch.as_tensor(delta, device=device)                    # (S, C)
        self.token_class = torch.as_tensor(token_class, device=device)       # (V,)
        self.accept = torch.as_tensor(accept, device=device)                 # (S,)
        self.starts = torch.as_tensor(starts, device=device)[which]          # (B,)
        self.free_start = int(starts[-1])  # the start of the unconstrained part
        self.adj = _adjacency(self.delta, self.token_class,
                              model.real_token_mask.to(device))               # (S, S)
        span = (torch.ones(tokens.shape, dtype=torch.bool, device=device) if self.span is None
                else self.span.to(device))
        require(span.shape == tokens.shape, f"constraint: span of shape {tuple(span.shape)} "
                                            f"for tokens of shape {tuple(tokens.shape)}")
        self.full_span = span
        # the batch's text lies in columns [first, last): the state sets step through those
        where = span.any(0).nonzero().squeeze(1).tolist() or [0]
        self.first, self.last = where[0], where[-1] + 1
        lengths = span.sum(1).tolist()
        for r, spec in enumerate(specs):
            if spec is not None:
                _check_length(dfas[unique.index(spec)], spec, lengths[r])
        ok = self.feasible(tokens, torch.arange(b, device=device))
        if not bool(ok.all()):
            bad = int((~ok).nonzero()[0])
            spec = specs[bad]
            pads = dfas[unique.index(spec)].pads
            raise UnmaskError(f"{spec.kind}: row {bad}: its given tokens cannot be completed "
                              "into a string of the language" + ("" if pads else
                              f" that fills its {lengths[bad]} positions exactly (a template "
                              "or a model without EOS fixes the length)"))

    def bound_rows(self, rows: torch.Tensor) -> torch.Tensor:
        """(R,) bool: the rows that have a language (not None)."""
        return self.starts[rows] != self.free_start

    def record(self, row: int, stats: dict) -> dict | None:
        """What a result reports for ``row``: the constraint's ``kind`` and ``hash`` and the
        row's ``cut_passes`` from a decode's ``stats`` (None for a row without one)."""
        spec = self.specs[row] if self.specs is not None else self.spec
        if spec is None:
            return None
        return {**spec.record(), "cut_passes": int(stats["cut_passes"][row])}

    # ---------------------------------------------------------------- state sets

    def _moves(self, x, rows, lo: int, hi: int):
        """(R, hi - lo) kind of each position lo..hi-1 (0 skip, 1 committed, 2 masked) and
        (R, hi - lo, S) the next state of every state under its token."""
        span, x = self.full_span[rows, lo:hi], x[:, lo:hi]
        masked = x == self.mask_id
        kind = torch.where(span, torch.where(masked, 2, 1), 0)
        cls = self.token_class[x.clamp(0, len(self.token_class) - 1)]      # (R, N)
        nxt = self.delta.t()[cls]                                           # (R, N, S)
        return kind, nxt

    def _forward(self, x, rows, stop: int):
        """F[0..stop] (a list of (R, S) float 0/1); positions before the batch's first text
        position leave the start sets as they are (not stepped through)."""
        r = x.shape[0]
        first = min(self.first, stop)
        kind, nxt = self._moves(x, rows, first, stop)
        f = torch.zeros(r, self.delta.shape[0], device=x.device)
        f[torch.arange(r, device=x.device), self.starts[rows]] = 1.0
        out = [f] * (first + 1)
        for i in range(stop - first):
            moved = torch.zeros_like(f).scatter_add_(1, nxt[:, i], f)
            free = f @ self.adj
            k = kind[:, i, None]
            f = torch.where(k == 0, f, torch.where(k == 1, moved, free)).clamp_(max=1.0)
            out.append(f)
        return out

    def _backward(self, x, rows, start: int):
        """B[start..N] (a list of (R, S) float 0/1, B[N] the accepting states); positions
        after the batch's last text position leave them as they are."""
        n = x.shape[1]
        last = max(min(self.last, n), start)
        kind, nxt = self._moves(x, rows, start, last)
        b = self.accept.float().expand(x.shape[0], -1).clone()
        out = [b] * (n - last + 1)
        for i in range(last - start - 1, -1, -1):
            moved = b.gather(1, nxt[:, i])
            free = b @ self.adj.t()
            k = kind[:, i, None]
            b = torch.where(k == 0, b, torch.where(k == 1, moved, free)).clamp_(max=1.0)
            out.append(b)
        return out[::-1]

    def feasible(self, tokens, rows):
        f = self._forward(tokens, rows, tokens.shape[1])[-1]
        return (f * self.accept).sum(1) > 0

    def allowed(self, tokens, rows, columns):
        lo, hi = columns.start, columns.stop
        f = torch.stack(self._forward(tokens, rows, hi)[lo:hi], 1)           # (R, W, S)
        b = torch.stack(self._backward(tokens, rows, lo)[1:hi - lo + 1], 1)  # B[i + 1]
        r, w, s = f.shape
        c = self.delta.shape[1]
        flat_f, flat_b = f.reshape(r * w, s), b.reshape(r * w, s)
        ok = torch.empty(r * w, c, dtype=torch.bool, device=tokens.device)
        step = max(1, _CHUNK // max(1, s * c))
        for at in range(0, r * w, step):  # chunks fixed by the shapes: no host read
            part = flat_b[at:at + step][:, self.delta]                        # (M, S, C)
            ok[at:at + step] = torch.einsum("ms,msc->mc", flat_f[at:at + step], part) > 0
        classes = ok.view(r, w, c)[..., self.token_class]                     # (R, W, V)
        span = self.full_span[rows][:, lo:hi, None]
        masked = (tokens[:, lo:hi] == self.mask_id)[..., None]
        return classes | ~(span & masked)


#: each tokenizer's spelling, by (id, vocabulary size, EOS ids), with the tokenizer kept
_SPELLINGS: dict = {}


def _check_length(dfa: TokenDFA, spec: ConstraintSpec, length: int) -> None:
    """Refuse a canvas too short for the language's shortest string."""
    require(dfa.min_tokens <= length,
            f"{spec.kind}: its shortest string takes {dfa.min_tokens} tokens; the canvas "
            f"holds {length}")


def merge(dfas: list[TokenDFA], vocab: int):
    """One automaton of several (disjoint states, each its own start) and, last, the
    unconstrained language (one accepting state every token loops on): (delta (S, C),
    token_class (V,), accept (S,), starts (len(dfas) + 1,)), numpy. Tokens fall in the same
    class when they do in every part."""
    parts = [(d.delta, d.token_class, d.accept, d.start) for d in dfas]
    parts.append((np.array([[0], [1]]), np.zeros(vocab, dtype=np.int64),
                  np.array([False, True]), 1))
    keys = np.stack([p[1] for p in parts])                                   # (K, V)
    combos, token_class = np.unique(keys, axis=1, return_inverse=True)      # (K, C)
    offsets = np.cumsum([0] + [p[0].shape[0] for p in parts])
    delta = np.concatenate([p[0][:, combos[k]] + offsets[k] for k, p in enumerate(parts)])
    accept = np.concatenate([p[2] for p in parts])
    starts = np.array([p[3] + offsets[k] for k, p in enumerate(parts)])
    return delta, token_class.reshape(-1), accept, starts


def _adjacency(delta: torch.Tensor, token_class: torch.Tensor, real: torch.Tensor
               ) -> torch.Tensor:
    """(S, S) float 0/1: s -> s' by some token the model may emit (each part's dead state
    0 is never co-reachable, so it never makes a token allowed)."""
    s = delta.shape[0]
    used = torch.zeros(delta.shape[1], dtype=torch.bool, device=delta.device)
    used[token_class[real]] = True
    adj = torch.zeros(s, s, device=delta.device)
    src = torch.arange(s, device=delta.device)[:, None].expand_as(delta)
    adj[src[:, used].reshape(-1), delta[:, used].reshape(-1)] = 1.0
    return adj
