"""Antibody heavy chains read from a germline table: IMGT positions, regions, the split."""

import numpy as np
import pytest

from unmask.antibody import data
from unmask.antibody.data import (
    REGIONS,
    chain_from_gapped,
    germline_table,
    load_heavy_chains,
    split_of,
    training_corpus,
)
from unmask.errors import UnmaskError

#: IGHV1-18*01 as ANARCI aligns it to the 128 IMGT positions
GAPPED = ("QVQLVQSGA-EVKKPGASVKVSCKASGYTF----TSYGISWVRQAPGQGLEWMGWISAY--NGNTNYAQKLQ-GRVTMTTDT"
          "STSTAYMELRSLRSDDTAVYYCAR----------------------")


def test_chain_from_gapped_keeps_each_residues_imgt_position():
    c = chain_from_gapped("human IGHV1-18*01", "human", GAPPED)
    assert c.sequence == GAPPED.replace("-", "")
    assert len(c.imgt) == len(c.sequence) == 98
    assert c.imgt[:10] == (1, 2, 3, 4, 5, 6, 7, 8, 9, 11)  # IMGT 10 is a gap
    assert c.imgt[-1] == 106 and c.sequence[c.imgt.index(104)] == "C"  # conserved Cys 104
    # CDR1 27-38 holds GYTF + TSYG (31-34 gapped), CDR2 56-65 ISAY + NGNT, CDR3 105-106 AR
    cdr = c.region_mask()
    assert "".join(np.array(list(c.sequence))[cdr]) == "GYTFTSYG" + "ISAYNGNT" + "AR"
    assert "".join(np.array(list(c.sequence))[c.region_mask(("cdr2",))]) == "ISAYNGNT"
    assert c.region_mask(("fr4",)).sum() == 0
    with pytest.raises(UnmaskError, match="regions"):
        c.region_mask(("cdr4",))
    with pytest.raises(UnmaskError, match="128"):
        chain_from_gapped("x", "human", GAPPED[:-1])


def test_regions_tile_the_128_imgt_positions():
    covered = sorted(p for lo, hi in REGIONS.values() for p in range(lo, hi + 1))
    assert covered == list(range(1, 129))


def test_split_is_by_gene_and_fixed():
    # alleles of one gene, and a duplicated gene's D copy, go to the same side
    assert split_of("human", "IGHV1-69*01") == split_of("human", "IGHV1-69*12") \
        == split_of("human", "IGHV1-69D*01")
    assert {split_of("human", f"IGHV{i}-1*01") for i in range(1, 40)} == {"train", "held_out"}


def _table(tmp_path):
    """A germlines.py of two species in ANARCI's layout, with a duplicate sequence."""
    other = GAPPED.replace("QVQLVQ", "EVQLVE")
    table = {"V": {"H": {"human": {"IGHV1-18*01": GAPPED, "IGHV1-18*02": other,
                                   "IGHV9-9*01": GAPPED},
                         "mouse": {"IGHV1-1*01": other}}}, "J": {}}
    path = tmp_path / "germlines.py"
    path.write_text(f"all_germlines = {table!r}\n")
    return str(path)


def test_load_dedupes_and_splits_a_table(tmp_path):
    path = _table(tmp_path)
    every = load_heavy_chains("all", species=("human", "mouse"), path=path)
    # IGHV9-9*01 repeats IGHV1-18*01 and mouse IGHV1-1*01 repeats IGHV1-18*02: kept once
    assert [c.name for c in every] == ["human IGHV1-18*01", "human IGHV1-18*02"]
    train = load_heavy_chains("train", species=("human", "mouse"), path=path)
    held = load_heavy_chains("held_out", species=("human", "mouse"), path=path)
    assert sorted(c.name for c in train + held) == [c.name for c in every]
    with pytest.raises(UnmaskError, match="species"):
        load_heavy_chains("all", species=("llama",), path=path)
    with pytest.raises(UnmaskError, match="split"):
        load_heavy_chains("test", path=path)


def test_training_corpus_joins_chains_with_the_models_specials(tmp_path):
    chains = load_heavy_chains("all", species=("human",), path=_table(tmp_path))
    text = training_corpus(chains)
    assert text == chains[0].sequence + "[SEP][CLS]" + chains[1].sequence + "\n"


def test_germline_table_refuses_a_file_without_the_table(tmp_path):
    path = tmp_path / "germlines.py"
    path.write_text("other = {}\n")
    with pytest.raises(ValueError, match="all_germlines"):
        germline_table(str(path))


def test_installed_anarci_splits_disjoint_and_whole():
    pytest.importorskip("anarci")
    train, held, every = (load_heavy_chains(s) for s in ("train", "held_out", "all"))
    assert len(train) + len(held) == len(every) > 500
    assert not {c.sequence for c in train} & {c.sequence for c in held}
    assert 0.1 < len(held) / len(every) < 0.35
    for c in every:
        assert list(c.imgt) == sorted(c.imgt) and c.imgt[-1] <= 108
        assert set(c.sequence) <= set("ACDEFGHIKLMNPQRSTVWY")
        assert c.region_mask(("cdr1",)).any() and c.region_mask(("cdr2",)).any()
    assert data.SOURCE.startswith("IMGT germline")
