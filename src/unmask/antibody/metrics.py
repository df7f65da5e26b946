"""Metrics of filled or generated antibody sequences (residue strings).

- :func:`residue_recovery`: share of masked positions filled with the natural residue.
- :func:`pseudo_perplexity`: exp of the mean of -log p(x_i | x without i) under a masked
  model, each residue masked once (Salazar et al. 2020), batched over all (sequence,
  position) pairs.
- :func:`mean_pairwise_identity`: the set's diversity (lower is more diverse).
- :func:`composition_jsd`: amino-acid composition of a set against a natural set, nats.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from unmask.antibody.settings import InfillCase
from unmask.errors import require
from unmask.infill import encode_residues, encode_text
from unmask.models.base import MaskedModel
from unmask.protein.metrics import composition, jsd
from unmask.protein.tokens import PROTEIN_RESIDUES, encode


def residue_recovery(filled: Sequence[str], cases: Sequence[InfillCase]) -> np.ndarray:
    """(B,) per case: the share of its masked positions where ``filled`` (whole sequences,
    e.g. ``Generation.text``) holds the truth's residue. The pooled figure over all masked
    positions is ``(r * n).sum() / n.sum()`` with ``n = [c.masked.sum() for c in cases]``."""
    require(len(filled) == len(cases), f"filled: {len(filled)} sequences for "
                                       f"{len(cases)} cases")
    out = np.zeros(len(cases))
    for i, (seq, case) in enumerate(zip(filled, cases, strict=True)):
        require(case.truth is not None, f"case {i} ({case.name}): no truth to recover")
        require(len(seq) == case.length, f"filled {i}: {len(seq)} residues, the case has "
                                         f"{case.length}")
        got = np.frombuffer(seq.encode(), dtype=np.uint8)
        want = np.frombuffer(case.truth.encode(), dtype=np.uint8)
        out[i] = (got == want)[case.masked].mean()
    return out


def encode_sequence(model: MaskedModel, sequence: str) -> list[int]:
    """The model's token ids of a residue string: through its tokenizer (special tokens
    added, as AntiBERTy's ``[CLS] ... [SEP]``) or as protein ids when it has none."""
    tokenizer = getattr(model, "tokenizer", None)
    if tokenizer is not None:
        return encode_text(tokenizer, sequence)
    return encode_residues(sequence, PROTEIN_RESIDUES)


def pseudo_perplexity(model: MaskedModel, sequences: Sequence[str], batch_size: int = 64
                      ) -> np.ndarray:
    """(B,) pseudo-perplexity of each residue string under ``model``:
    exp(-(1/L) sum_i log p(x_i | x with i masked)), p renormalised over the model's real
    tokens (a model uniform over 20 residues scores 20). Sequences of equal token length go
    together: each of their L residues is masked in its own row, and the rows run in batches
    of ``batch_size``."""
    require(batch_size >= 1, f"batch_size: must be >= 1, got {batch_size}")
    ids = [encode_sequence(model, s) for s in sequences]
    real = model.real_token_mask.to(model.device)
    out = np.zeros(len(ids))
    for n in sorted({len(r) for r in ids}):
        group = [i for i, r in enumerate(ids) if len(r) == n]
        rows = torch.tensor([ids[i] for i in group], dtype=torch.long, device=model.device)
        nll = _masked_nll(model, rows, real, batch_size)  # (G, n), 0 where not a residue
        count = real[rows].sum(1).clamp(min=1)
        out[group] = torch.exp(nll.sum(1) / count).cpu().numpy()
    return out


def _masked_nll(model: MaskedModel, rows: torch.Tensor, real: torch.Tensor,
                batch_size: int) -> torch.Tensor:
    """(G, N) -log p(rows[g, i]) with position i alone masked, for each real token of rows
    (G, N); 0 elsewhere."""
    g, n = rows.shape
    where = real[rows].nonzero()  # (P, 2): (row, position) of every residue
    nll = torch.zeros(g, n, dtype=torch.float64, device=rows.device)
    for at in range(0, len(where), batch_size):
        part = where[at:at + batch_size]
        x = rows[part[:, 0]].clone()
        k = torch.arange(len(part), device=rows.device)
        x[k, part[:, 1]] = model.mask_id
        with torch.inference_mode():
            logits = model(x).logits[k, part[:, 1]].double()  # (b, V)
        logp = torch.log_softmax(logits.masked_fill(~real, -torch.inf), dim=-1)
        nll[part[:, 0], part[:, 1]] = -logp[k, rows[part[:, 0], part[:, 1]]]
    return nll


def mean_pairwise_identity(sequences: Sequence[str]) -> float:
    """Mean over the pairs of a set of residue strings of their identity: residues equal at
    the same position, over the longer length (no alignment; positions past the shorter end
    count as different). 1 for identical copies; ~0.05 for random strings of 20 letters."""
    require(isinstance(sequences, (list, tuple)) and all(isinstance(s, str) for s in sequences),
            f"sequences: expected a list of residue strings, got {type(sequences).__name__}")
    require(len(sequences) >= 2, "sequences: identity needs at least 2")
    width = max(len(s) for s in sequences)
    x = np.full((len(sequences), width), -1, dtype=np.int64)
    for i, s in enumerate(sequences):
        x[i, :len(s)] = encode(s)
    lengths = np.array([len(s) for s in sequences])
    same = ((x[:, None, :] == x[None, :, :]) & (x[:, None, :] >= 0)).sum(-1)
    identity = same / np.maximum(lengths[:, None], lengths[None, :])
    upper = np.triu_indices(len(sequences), k=1)
    return float(identity[upper].mean())


def composition_jsd(sequences: Sequence[str], reference: Sequence[str]) -> float:
    """Jensen-Shannon divergence (nats, in [0, ln 2]) between the pooled amino-acid
    composition of ``sequences`` and that of ``reference`` (e.g. the held-out natural
    chains)."""
    require(len(sequences) > 0 and len(reference) > 0, "sequences: need at least one in "
                                                       "each set")
    return float(jsd(composition([encode(s) for s in sequences]),
                     composition([encode(s) for s in reference])))
