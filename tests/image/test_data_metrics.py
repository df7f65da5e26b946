import numpy as np
import pytest
import torch

from unmask.decode import DecodeConfig, decode
from unmask.errors import UnmaskError
from unmask.image.classifier import ClassifierConfig, DigitClassifier, shift_images
from unmask.image.data import (
    N_PIXELS,
    SEQ_LEN,
    decode_tokens,
    encode,
    image_model_config,
    load_digits_split,
    prompts,
    quantise,
    training_batch,
    vocab,
)
from unmask.image.metrics import (
    bootstrap_se,
    class_accuracy,
    fid,
    frechet_distance,
    gaussian_stats,
    inception_score,
    paired_fid_difference,
)
from unmask.image.model import DigitsMDM
from unmask.samplers import make_sampler


@pytest.mark.parametrize("levels", [2, 9, 17])
def test_encode_decode_round_trip(levels):
    g = torch.Generator().manual_seed(levels)
    pixels = torch.randint(0, levels, (7, N_PIXELS), generator=g)
    labels = torch.arange(7) % 10
    tokens = encode(pixels, labels, levels)
    assert tokens.shape == (7, SEQ_LEN)
    back_pixels, back_labels = decode_tokens(tokens, levels)
    assert torch.equal(back_pixels, pixels) and torch.equal(back_labels, labels)


def test_quantise_endpoints_and_bad_levels():
    assert quantise(np.array([0, 8, 16]), 9).tolist() == [0, 4, 8]
    assert quantise(np.arange(17), 17).tolist() == list(range(17))
    with pytest.raises(UnmaskError, match="levels"):
        quantise(np.array([0]), 1)
    with pytest.raises(UnmaskError, match="pixels"):
        encode(torch.full((1, N_PIXELS), 9), torch.zeros(1, dtype=torch.long), 9)


def test_split_is_by_image_and_fixed():
    train, held = load_digits_split(9)
    assert len(train) + len(held) == 1797 and abs(len(held) - 359) <= 1
    again, _ = load_digits_split(9)
    assert torch.equal(train.pixels, again.pixels)
    # no held-out image sits in the training part (ties between identical images aside,
    # the split is by index: the parts are disjoint as multisets of rows up to duplicates)
    train_rows = {tuple(r) for r in train.tokens().tolist()}
    shared = sum(tuple(r) in train_rows for r in held.tokens().tolist())
    assert shared <= 2


def test_training_batch_never_masks_the_class_and_is_deterministic():
    train, _ = load_digits_split(9)
    _, mask_id = vocab(9)
    a = training_batch(train.tokens(), 3, 32, mask_id, seed=1)
    b = training_batch(train.tokens(), 3, 32, mask_id, seed=1)
    assert all(torch.equal(x, y) for x, y in zip(a, b, strict=True))
    inputs, targets, mask = a
    assert not mask[:, 0].any() and mask[:, 1:].any(1).all()
    assert torch.equal(inputs[~mask], targets[~mask]) and (inputs[mask] == mask_id).all()


def test_digits_model_only_emits_each_position_vocabulary():
    torch.manual_seed(0)
    model = DigitsMDM(image_model_config(9, d_model=16, n_layers=1, n_heads=2, d_ff=32)).eval()
    x = prompts(torch.arange(4), 9)
    logits = model(x).logits
    assert torch.isinf(logits[:, 1:, 9:]).all() and torch.isfinite(logits[:, 1:, :9]).all()
    res = decode(model, x, make_sampler("topk", k=16), DecodeConfig(temperature=1.0))
    pixels, labels = decode_tokens(res.tokens, 9)
    assert torch.equal(labels, torch.arange(4)) and pixels.max() < 9


def test_fid_identical_sets_is_zero_and_symmetric():
    rng = np.random.default_rng(0)
    a = rng.normal(size=(200, 6)) @ rng.normal(size=(6, 6))
    b = rng.normal(size=(150, 6)) * 2 + 1
    assert fid(a, a) == pytest.approx(0.0, abs=1e-8)
    assert fid(a, b) == pytest.approx(fid(b, a), rel=1e-9)
    assert fid(a, b) > 1.0


def test_paired_fid_difference_is_exact_and_its_error_shrinks_with_pairing():
    rng = np.random.default_rng(1)
    ref_feats = rng.normal(size=(300, 4))
    reference = gaussian_stats(ref_feats)
    a = rng.normal(size=(200, 4)) + 0.5
    b = a + 0.05 * rng.normal(size=(200, 4))  # each sample of b is its partner in a, nudged
    diff, se = paired_fid_difference(a, b, reference, rounds=100, seed=0)
    assert diff == pytest.approx(fid(a, ref_feats) - fid(b, ref_feats), rel=1e-9)
    assert paired_fid_difference(a, a, reference, rounds=20)[1] == 0.0
    unpaired = paired_fid_difference(a, b[rng.permutation(200)], reference, rounds=100,
                                     seed=0)[1]
    assert se < unpaired / 3  # partners resampled together: most of the noise cancels
    with pytest.raises(UnmaskError, match="equal shapes"):
        paired_fid_difference(a, b[:10], reference)


def test_frechet_distance_of_diagonal_gaussians_is_closed_form():
    mu_a, mu_b = np.array([0.0, 1.0, 2.0]), np.array([1.0, 1.0, 0.0])
    var_a, var_b = np.array([1.0, 4.0, 0.25]), np.array([9.0, 1.0, 0.25])
    expected = ((mu_a - mu_b) ** 2).sum() + ((np.sqrt(var_a) - np.sqrt(var_b)) ** 2).sum()
    assert frechet_distance(mu_a, np.diag(var_a), mu_b, np.diag(var_b)) == \
        pytest.approx(expected, rel=1e-12)


def test_inception_score_bounds_and_accuracy():
    assert inception_score(np.eye(10)) == pytest.approx(10.0)
    assert inception_score(np.full((5, 10), 0.1)) == pytest.approx(1.0)
    assert inception_score(np.tile(np.eye(10)[3], (4, 1))) == pytest.approx(1.0)
    assert class_accuracy(np.eye(3), np.array([0, 1, 0])) == pytest.approx(2 / 3)
    assert bootstrap_se(lambda idx: 1.5, 10) == 0.0
    with pytest.raises(UnmaskError, match="n"):
        bootstrap_se(lambda idx: 0.0, 1)


def test_classifier_round_trip_and_shift(tmp_path):
    torch.manual_seed(0)
    clf = DigitClassifier(ClassifierConfig(channels=4, features=8))
    images = torch.rand(5, 8, 8)
    clf.save_pretrained(tmp_path / "c", extra={"note": 1})
    back = DigitClassifier.from_pretrained(tmp_path / "c")
    f1, p1 = clf.embed(images)
    f2, p2 = back.embed(images)
    assert torch.equal(f1, f2) and torch.allclose(p2.sum(1), torch.ones(5, dtype=p2.dtype))
    assert back.metadata["note"] == 1
    assert torch.equal(shift_images(images, np.random.default_rng(0), max_shift=0), images)
    one = torch.zeros(1, 8, 8)
    one[0, 4, 4] = 1.0
    moved = shift_images(one, np.random.default_rng(1))
    assert moved.sum() == 1.0  # a centre pixel moves by at most one and is never cut off
    with pytest.raises(UnmaskError, match="classifier"):
        DigitClassifier.from_pretrained(tmp_path)


def test_shipped_models_are_small_and_work():
    from unmask.image.bench import class_labels
    from unmask.image.data import levels_of, to_unit
    from unmask.pretrained import pretrained_path

    for name in ("image", "digit_classifier"):
        assert sum(f.stat().st_size for f in pretrained_path(name).iterdir()) < 2_000_000
    clf = DigitClassifier.from_pretrained(pretrained_path("digit_classifier"))
    assert clf.metadata["heldout_accuracy"] > 0.97
    model = DigitsMDM.from_pretrained(pretrained_path("image"))
    levels = levels_of(model)
    labels = class_labels(20)
    res = decode(model, prompts(labels, levels), make_sampler("topk", k=8),
                 DecodeConfig(temperature=1.0), seed=3)
    pixels, _ = decode_tokens(res.tokens, levels)
    _, probs = clf.embed(to_unit(pixels, levels))
    # a trained model draws the digit it is asked for (chance is 10%)
    assert class_accuracy(probs, labels) >= 0.6
