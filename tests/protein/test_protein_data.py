"""Tokens, the near-duplicate-aware split, training crops and the background composition."""

import numpy as np
import pytest
import torch

from unmask import UnmaskError
from unmask.protein.data import (
    CleanedProteins,
    CropSampler,
    background_composition,
    kmer_codes,
    load_split,
    near_duplicate_groups,
    split_proteins,
    training_batch,
)
from unmask.protein.tokens import (
    AMINO_ACIDS,
    MASK_ID,
    PAD_ID,
    check_padded_tokens,
    decode_tokens,
    encode,
    generation_inputs,
    padded_rows,
    random_lengths,
)

pytest.importorskip("pyhmmer")


def letters(tokens):
    return "".join(AMINO_ACIDS[t] for t in tokens)


def test_tokens_round_trip_and_errors():
    x = padded_rows([encode("MKV"), encode("ACDEFGHIKLMNPQRSTVWY")], max_length=24)
    assert x.shape == (2, 24) and int((x == PAD_ID).sum()) == 21 + 4
    assert decode_tokens(x) == ["MKV", "ACDEFGHIKLMNPQRSTVWY"]
    with pytest.raises(UnmaskError, match="'X' is not one of the 20"):
        encode("MKXV")
    with pytest.raises(UnmaskError, match="exceeds max_length"):
        padded_rows([encode("MKV")], max_length=2)


def test_generation_inputs_mask_exactly_the_given_length():
    x = generation_inputs(np.array([3, 5]), max_length=6)
    assert x.tolist() == [[MASK_ID] * 3 + [PAD_ID] * 3, [MASK_ID] * 5 + [PAD_ID]]
    with pytest.raises(UnmaskError, match="lengths: must lie in"):
        generation_inputs(np.array([0, 5]), max_length=6)
    with pytest.raises(UnmaskError, match="lengths: must lie in"):
        generation_inputs(np.array([7]), max_length=6)
    lengths = random_lengths(1000, seed=3)
    assert lengths.min() == 50 and lengths.max() == 100
    assert np.array_equal(lengths, random_lengths(1000, seed=3))


def test_pad_must_be_a_suffix():
    seen = []
    check_padded_tokens(torch.tensor([[1, MASK_ID, PAD_ID]]), seen.append)
    assert seen[0].tolist() == [[1, MASK_ID, MASK_ID]]  # PAD reaches the model check as MASK
    with pytest.raises(UnmaskError, match="PAD must only follow"):
        check_padded_tokens(torch.tensor([[1, PAD_ID, 2]]), seen.append)


def test_background_is_hmmers_in_our_letter_order():
    from pyhmmer.easel import Alphabet
    from pyhmmer.plan7 import Background

    bg = background_composition()
    alphabet = Alphabet.amino()
    raw = list(Background(alphabet).residue_frequencies)
    assert bg.shape == (20,) and bg.sum() == pytest.approx(1.0)
    for i, a in enumerate(AMINO_ACIDS):
        assert bg[i] == pytest.approx(raw[alphabet.symbols.index(a)] / sum(raw))


def mutate(seq, rate, rng):
    seq = seq.copy()
    hit = rng.uniform(size=len(seq)) < rate
    seq[hit] = (seq[hit] + rng.integers(1, 20, hit.sum())) % 20  # a different residue
    return seq


def test_near_duplicates_are_grouped_and_unrelated_proteins_are_not():
    rng = np.random.default_rng(0)
    base = [rng.integers(0, 20, 200) for _ in range(6)]
    close = mutate(base[0], 0.05, rng)   # 95% identity: a near-duplicate
    far = mutate(base[1], 0.6, rng)      # 40% identity: not one
    fragment = base[2][50:120].copy()    # a fragment of a longer protein
    groups = near_duplicate_groups([*base, close, far, fragment])
    assert groups[6] == groups[0] and groups[8] == groups[2]
    assert groups[7] != groups[1]
    assert len(set(groups[:6].tolist())) == 6
    assert len(kmer_codes(np.array([1, 1, 1, 1, 1, 1, 1]))) == 1


def test_split_keeps_near_duplicate_groups_on_one_side():
    rng = np.random.default_rng(1)
    seqs, names = [], []
    for g in range(40):
        root = rng.integers(0, 20, 150)
        for c in range(3):
            seqs.append(mutate(root, 0.03, rng))
            names.append(f"g{g}c{c}")
    split = split_proteins(CleanedProteins(names, seqs), heldout_fraction=0.2, seed=5)
    held_groups = {n.split("c")[0] for n in split.heldout_names}
    train_groups = {n.split("c")[0] for n in split.train_names}
    assert not held_groups & train_groups
    assert len(split.heldout) == 24 and len(split.train) == 96
    again = split_proteins(CleanedProteins(names, seqs), heldout_fraction=0.2, seed=5)
    assert again.heldout_names == split.heldout_names
    with pytest.raises(UnmaskError, match="heldout_fraction"):
        split_proteins(CleanedProteins(names, seqs), heldout_fraction=1.0)
    with pytest.raises(UnmaskError, match="at least 2"):
        split_proteins(CleanedProteins(names[:1], seqs[:1]))


def test_proteome_split_shares_no_near_duplicate_across_sides():
    split = load_split()
    assert len(split.train) + len(split.heldout) == 2086  # 2,100 less 14 with X residues
    assert split.skipped["nonstandard"] == 14
    assert 0.1 <= len(split.heldout) / 2086 < 0.12
    groups = near_duplicate_groups(split.train + split.heldout)
    assert not set(groups[:len(split.train)].tolist()) & set(groups[len(split.train):].tolist())


def test_training_batches_are_pure_crops_of_training_proteins_with_pad_never_masked():
    rng = np.random.default_rng(2)
    proteins = [rng.integers(0, 20, n) for n in (40, 130, 300)]
    sampler = CropSampler(proteins)
    a = training_batch(sampler, 7, 64, seed=1)
    b = training_batch(sampler, 7, 64, seed=1)
    assert all(torch.equal(u, v) for u, v in zip(a, b, strict=True))
    inputs, targets, masked = a
    joined = "|".join(letters(p) for p in proteins)
    for row, m, x in zip(targets, masked, inputs, strict=True):
        residues = row[row != PAD_ID]
        n = len(residues)
        assert 40 <= n <= 100 and bool((row[n:] == PAD_ID).all())
        assert letters(residues.tolist()) in joined
        assert bool(m.any()) and not bool(m[n:].any())
        assert torch.equal(x, row.masked_fill(m, MASK_ID))
    # mask ratios spread over (0, 1]: some rows nearly all masked, some barely
    share = masked.sum(1) / (targets != PAD_ID).sum(1)
    assert share.min() < 0.2 and share.max() > 0.8


def test_label_contexts_come_from_held_out_proteins_and_ignore_shard_boundaries():
    from unmask.protein.data import label_contexts

    split = load_split()
    whole = label_contexts(3, 0, 6, (0.2, 0.5), split)
    parts = torch.cat([label_contexts(3, 0, 2, (0.2, 0.5), split),
                       label_contexts(3, 2, 4, (0.2, 0.5), split)])
    assert torch.equal(whole, parts)
    held = "|".join(letters(p) for p in split.heldout)
    for row in whole:
        n = int((row != PAD_ID).sum())
        share = float((row == MASK_ID).sum()) / n
        assert 50 <= n <= 100 and 0.19 <= share <= 0.51
        visible = row[:n].tolist()
        # every unmasked stretch of the context is a substring of a held-out protein
        for chunk in "".join("?" if t == MASK_ID else AMINO_ACIDS[t] for t in visible).split("?"):
            assert chunk in held
    with pytest.raises(UnmaskError, match="mask_ratio"):
        label_contexts(0, 0, 1, (0.5, 0.5), split)
