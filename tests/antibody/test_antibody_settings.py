"""The three antibody settings: templates that unmask.infill reads, their truth and masks."""

import numpy as np
import pytest

from unmask.antibody.data import chain_from_gapped
from unmask.antibody.settings import (
    cdr_infilling,
    length_distribution,
    make_template,
    random_masking,
    unconditional,
)
from unmask.errors import UnmaskError
from unmask.infill import encode_residues
from unmask.protein.tokens import MASK_ID, PROTEIN_RESIDUES

#: IGHV1-18*01 aligned to the 128 IMGT positions, and a copy one CDR2 residue shorter
GAPPED = ("QVQLVQSGA-EVKKPGASVKVSCKASGYTF----TSYGISWVRQAPGQGLEWMGWISAY--NGNTNYAQKLQ-GRVTMTTDT"
          "STSTAYMELRSLRSDDTAVYYCAR----------------------")
CHAINS = [chain_from_gapped("a", "human", GAPPED),
          chain_from_gapped("b", "human", GAPPED.replace("ISAY--", "ISA---"))]


def _masks_of(template):
    return np.array(encode_residues(template, PROTEIN_RESIDUES)) == MASK_ID


def test_make_template_writes_runs():
    assert make_template("ABCDEF", np.array([1, 1, 0, 1, 0, 0], bool)) == "<mask:2>C<mask:1>EF"
    assert make_template("AB", np.array([0, 0], bool)) == "AB"
    with pytest.raises(UnmaskError):
        make_template("AB", np.array([1], bool))


def test_cdr_infilling_masks_exactly_the_cdrs():
    cases = cdr_infilling(CHAINS)
    c = cases[0]
    assert c.truth == CHAINS[0].sequence and c.masked.sum() == 8 + 8 + 2
    assert c.template == make_template(c.truth, c.masked)
    np.testing.assert_array_equal(_masks_of(c.template), c.masked)
    given = np.array(encode_residues(c.template, PROTEIN_RESIDUES))[~c.masked]
    truth = np.array(encode_residues(c.truth, PROTEIN_RESIDUES))
    np.testing.assert_array_equal(given, truth[~c.masked])
    only1 = cdr_infilling(CHAINS, regions=("cdr1",))[0]
    assert only1.masked.sum() == 8


def test_random_masking_ratio_seed_and_independence():
    a = random_masking(CHAINS, ratio=0.75, seed=3)
    for case, chain in zip(a, CHAINS, strict=True):
        assert case.masked.sum() == round(0.75 * len(chain.sequence))
        np.testing.assert_array_equal(_masks_of(case.template), case.masked)
    b = random_masking(CHAINS, ratio=0.75, seed=3)
    assert [c.template for c in a] == [c.template for c in b]
    # a case does not depend on the cases after it
    assert random_masking(CHAINS[:1], ratio=0.75, seed=3)[0].template == a[0].template
    assert random_masking(CHAINS, ratio=0.75, seed=4)[0].template != a[0].template
    r = random_masking(CHAINS * 20, ratio=(0.6, 0.9), seed=0)
    shares = np.array([c.masked.mean() for c in r])
    assert shares.min() >= 0.59 and shares.max() <= 0.91 and shares.std() > 0.02
    with pytest.raises(UnmaskError, match="ratio"):
        random_masking(CHAINS, ratio=(0.9, 0.6))


def test_unconditional_lengths_follow_the_distribution():
    dist = length_distribution(CHAINS)
    assert dist == {len(CHAINS[1].sequence): 0.5, len(CHAINS[0].sequence): 0.5}
    cases = unconditional(200, {97: 0.25, 98: 0.75}, seed=1)
    lengths = np.array([c.length for c in cases])
    assert set(lengths) == {97, 98} and 0.6 < (lengths == 98).mean() < 0.9
    assert all(c.truth is None and c.masked.all() and c.template == f"<mask:{c.length}>"
               for c in cases)
    assert [c.length for c in unconditional(200, {97: 0.25, 98: 0.75}, seed=1)] == \
        lengths.tolist()
    assert {c.length for c in unconditional(5, {50: 1.0, 60: 0.0})} == {50}
    with pytest.raises(UnmaskError, match="count"):
        unconditional(0, dist)
