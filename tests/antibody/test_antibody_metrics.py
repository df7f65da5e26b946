"""Antibody metrics: exact values on tiny inputs, and the batched pseudo-perplexity against
a one-row-at-a-time reference."""

import math

import numpy as np
import pytest
import torch

from unmask.antibody.metrics import (
    composition_jsd,
    mean_pairwise_identity,
    pseudo_perplexity,
    residue_recovery,
)
from unmask.antibody.settings import InfillCase
from unmask.errors import UnmaskError
from unmask.models.base import MaskedModel, ModelOutput
from unmask.protein.tokens import MASK_ID, PAD_ID, encode


class _FavoursA(MaskedModel):
    """A protein-vocabulary model: logit ln(k) on 'A' (id 0), 0 on the other residues, and a
    large logit on PAD, which pseudo-perplexity must leave out (not a real token)."""

    def __init__(self, k: float):
        super().__init__()
        self.vocab_size, self.mask_id, self.max_length, self.hidden_size = 22, MASK_ID, 64, 4
        self.real_token_ids = tuple(range(20))
        self.k = k

    def forward(self, tokens, output_hidden_layers=False):
        b, n = tokens.shape
        logits = torch.zeros(b, n, self.vocab_size)
        logits[..., 0] = math.log(self.k)
        logits[..., PAD_ID] = 50.0
        return ModelOutput(logits=logits, hidden=torch.zeros(b, n, 4))


class _Mixer(MaskedModel):
    """A small random model whose logits at each position depend on every token."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.vocab_size, self.mask_id, self.max_length, self.hidden_size = 22, MASK_ID, 64, 8
        self.real_token_ids = tuple(range(20))
        self.emb = torch.nn.Embedding(22, 8)
        self.pos = torch.nn.Parameter(torch.randn(64, 8))
        self.out = torch.nn.Linear(16, 22)

    def forward(self, tokens, output_hidden_layers=False):
        h = self.emb(tokens) + self.pos[: tokens.shape[1]]
        ctx = h.mean(1, keepdim=True).expand_as(h)
        return ModelOutput(logits=self.out(torch.cat([h, ctx], -1)), hidden=h)


def test_residue_recovery_counts_masked_positions_only():
    cases = [InfillCase("a", "<mask:2>CD", "ABCD", np.array([1, 1, 0, 0], bool)),
             InfillCase("b", "A<mask:3>", "AAAA", np.array([0, 1, 1, 1], bool))]
    # case a: A right, B wrong (the unmasked C/D mismatches do not count); case b: 2 of 3
    np.testing.assert_allclose(residue_recovery(["AXYY", "YAAC"], cases), [0.5, 2 / 3])
    with pytest.raises(UnmaskError, match="residues"):
        residue_recovery(["ABC", "AAAA"], cases)
    with pytest.raises(UnmaskError, match="no truth"):
        residue_recovery(["AAAA"], [InfillCase("u", "<mask:4>", None, np.ones(4, bool))])


def test_pseudo_perplexity_exact_under_a_known_model():
    k = 4.0
    p_a, p_other = k / (k + 19), 1 / (k + 19)
    got = pseudo_perplexity(_FavoursA(k), ["AAC", "CD", "A"], batch_size=2)
    want = [math.exp(-(2 * math.log(p_a) + math.log(p_other)) / 3), 1 / p_other, 1 / p_a]
    np.testing.assert_allclose(got, want, rtol=1e-7)  # float32 logits
    # uniform over the 20 residues: 20
    np.testing.assert_allclose(pseudo_perplexity(_FavoursA(1.0), ["ACDEFG"]), [20.0])


def _reference_pppl(model, seq):
    x = torch.tensor(encode(seq))[None]
    nll = []
    for i in range(x.shape[1]):
        y = x.clone()
        y[0, i] = MASK_ID
        logits = model(y).logits[0, i, :20].double()
        nll.append(-torch.log_softmax(logits, -1)[x[0, i]].item())
    return math.exp(sum(nll) / len(nll))


@pytest.mark.parametrize("batch_size", [1, 5, 64])
def test_pseudo_perplexity_batched_equals_one_at_a_time(batch_size):
    model = _Mixer()
    seqs = ["ACDKLMQ", "WYVAC", "ACDKLMW", "GG"]
    want = [_reference_pppl(model, s) for s in seqs]
    with torch.no_grad():
        np.testing.assert_allclose(pseudo_perplexity(model, seqs, batch_size=batch_size),
                                   want, rtol=1e-5)


def test_mean_pairwise_identity_exact():
    assert mean_pairwise_identity(["AC", "AD", "AC"]) == pytest.approx(2 / 3)
    assert mean_pairwise_identity(["ACD", "ACD"]) == 1.0
    assert mean_pairwise_identity(["AC", "ACD"]) == pytest.approx(2 / 3)  # over the longer
    assert mean_pairwise_identity(["AAAA", "CCCC"]) == 0.0
    with pytest.raises(UnmaskError):
        mean_pairwise_identity(["AC"])


def test_composition_jsd_exact():
    assert composition_jsd(["ACDA"], ["AADC"]) == pytest.approx(0.0, abs=1e-15)
    assert composition_jsd(["AAAA"], ["CC", "C"]) == pytest.approx(math.log(2))
    # p = (1/2 A, 1/2 C), q = (A): JSD = 1/2 KL(p||m) + 1/2 KL(q||m), m = (3/4, 1/4)
    want = 0.5 * (0.5 * math.log(0.5 / 0.75) + 0.5 * math.log(0.5 / 0.25)) \
        + 0.5 * math.log(1 / 0.75)
    assert composition_jsd(["AC"], ["A"]) == pytest.approx(want, rel=1e-12)
