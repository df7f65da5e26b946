"""Training on exact labels of the toy MDM: learning, early stopping, resume."""

import dataclasses
import json

import pytest
import torch
from safetensors.torch import load_file

from unmask import UnmaskError
from unmask.metrics import held_out_mask
from unmask.mi.estimator import EstimatorConfig, MIEstimator
from unmask.mi.estimator_eval import compute_features
from unmask.mi.estimator_losses import held_out_loss
from unmask.mi.estimator_train import EstimatorTrainConfig, train_estimator
from unmask.mi.label_set import LabelSet


@pytest.fixture(scope="module")
def toy_labels(positional_toy, toy_contexts):
    mi = positional_toy.conditional_mi(toy_contexts).float()
    return LabelSet(toy_contexts, mi, torch.arange(len(toy_contexts)),
                    positional_toy.fingerprint())


@pytest.fixture(scope="module")
def toy_hidden(positional_toy, toy_contexts):
    cfg = EstimatorConfig(hidden_size=positional_toy.hidden_size)
    return compute_features(positional_toy, toy_contexts, cfg, batch_size=100)


def new_estimator(model):
    torch.manual_seed(0)
    return MIEstimator(EstimatorConfig(hidden_size=model.hidden_size, d=32, n_heads=2,
                                       pair_hidden=8, pair_rank=8,
                                       model_fingerprint=model.fingerprint()))


def test_compute_features_matches_the_model(positional_toy, toy_contexts, toy_hidden):
    want = positional_toy(toy_contexts[:7]).hidden.to(torch.float16)
    assert torch.equal(toy_hidden[:7], want)
    cfg = EstimatorConfig(hidden_size=positional_toy.hidden_size, layer=0)
    layer0 = compute_features(positional_toy, toy_contexts[:7], cfg)
    assert layer0.shape == (7, 5, 4)  # the toy's first hidden layer: one-hot tokens


def test_marginal_features_are_the_models_probabilities_and_entropy(positional_toy,
                                                                   toy_contexts):
    from unmask.probs import entropy_from_log_probs, real_log_probs

    k = len(positional_toy.real_token_ids)
    cfg = EstimatorConfig(hidden_size=positional_toy.hidden_size, marginal_size=k)
    feats = compute_features(positional_toy, toy_contexts[:7], cfg, dtype=torch.float32)
    assert feats.shape == (7, 5, positional_toy.hidden_size + k + 1) == (7, 5, cfg.feature_size)
    out = positional_toy(toy_contexts[:7])
    real = torch.zeros(positional_toy.vocab_size, dtype=torch.bool)
    real[list(positional_toy.real_token_ids)] = True
    log_p = real_log_probs(out.logits, real)
    d = positional_toy.hidden_size
    torch.testing.assert_close(feats[..., :d], out.hidden.float())
    probs, ent = log_p.exp()[..., real].float(), entropy_from_log_probs(log_p).float()
    torch.testing.assert_close(feats[..., d:d + k], probs, atol=1e-6, rtol=0)
    torch.testing.assert_close(feats[..., -1], ent, atol=1e-5, rtol=0)
    bad = EstimatorConfig(hidden_size=positional_toy.hidden_size, marginal_size=k + 1)
    with pytest.raises(UnmaskError, match="real tokens"):
        compute_features(positional_toy, toy_contexts[:2], bad)


def test_training_beats_the_untrained_head_and_the_mean(positional_toy, toy_labels,
                                                        toy_hidden, tmp_path):
    cfg = EstimatorTrainConfig(batch_size=32, max_epochs=30, lr=3e-3, warmup_steps=20,
                               patience=100)
    est = new_estimator(positional_toy)
    res = train_estimator(est, toy_hidden, toy_labels, positional_toy.mask_id, cfg, tmp_path,
                          log=lambda s: None)
    initial = res["history"][0]["held_out_loss"]
    held = held_out_mask(toy_labels.groups, cfg.held_out)
    masked = toy_labels.tokens == positional_toy.mask_id
    pairs = masked[:, :, None] & masked[:, None, :] & ~torch.eye(5, dtype=torch.bool)
    train_mean = toy_labels.mi[~held][pairs[~held]].mean()
    constant = float(((toy_labels.mi[held] - train_mean) ** 2)[pairs[held]].mean())
    assert res["best_loss"] < 0.5 * initial
    assert res["best_loss"] < 0.9 * constant
    best = MIEstimator.load(tmp_path / "best", positional_toy)
    assert held_out_loss(best, toy_hidden[held], toy_labels.mi[held], masked[held]) \
        == pytest.approx(res["best_loss"], rel=1e-6)
    assert best.metadata["split"]["held_out_contexts"] == int(held.sum())
    lines = [json.loads(s) for s in (tmp_path / "history.jsonl").read_text().splitlines()]
    # the untrained head's line, then one per epoch
    assert len(lines) == 31 and lines[0]["baseline"] and lines[0]["step"] == 0
    assert sum(r.get("best", False) for r in lines) >= 1


def test_sqrt_scale_training_selects_on_its_own_scale(positional_toy, toy_labels,
                                                      toy_hidden, tmp_path):
    cfg = EstimatorTrainConfig(batch_size=32, max_epochs=10, lr=3e-3, warmup_steps=20,
                               patience=100, loss_scale="sqrt")
    res = train_estimator(new_estimator(positional_toy), toy_hidden, toy_labels,
                          positional_toy.mask_id, cfg, tmp_path, log=lambda s: None)
    held = held_out_mask(toy_labels.groups, cfg.held_out)
    masked = toy_labels.tokens == positional_toy.mask_id
    best = MIEstimator.load(tmp_path / "best", positional_toy)
    args = (best, toy_hidden[held], toy_labels.mi[held], masked[held])
    assert held_out_loss(*args, scale="sqrt") == pytest.approx(res["best_loss"], rel=1e-6)
    assert held_out_loss(*args) != pytest.approx(res["best_loss"], rel=1e-3)
    assert res["best_loss"] < 0.5 * res["history"][0]["held_out_loss"]


def test_early_stopping_stops_after_patience(positional_toy, toy_labels, toy_hidden,
                                             tmp_path):
    # lr 0 after warm-up is impossible; a tiny lr makes held-out improvements vanish, so the
    # stop comes from patience: best + patience evaluations, then stop
    cfg = EstimatorTrainConfig(batch_size=64, max_epochs=50, lr=1e-9, min_lr=1e-9,
                               warmup_steps=1, patience=3, eval_every=2)
    est = new_estimator(positional_toy)
    res = train_estimator(est, toy_hidden, toy_labels, positional_toy.mask_id, cfg, tmp_path,
                          log=lambda s: None)
    evals = res["history"][1:]
    best_at = min(range(len(evals)), key=lambda k: evals[k]["held_out_loss"])
    assert res["stopped"] == "early_stopping"
    assert len(evals) == best_at + 1 + cfg.patience
    assert res["steps"] < 50 * 6


class Interrupt(Exception):
    pass


@pytest.mark.parametrize("rank_weight", [0.0, 0.01])
def test_resume_reproduces_an_uninterrupted_run(positional_toy, toy_labels, toy_hidden,
                                                tmp_path, rank_weight):
    """Also with the ranking term, whose draws are a function of (seed, step)."""
    cfg = EstimatorTrainConfig(batch_size=32, max_epochs=3, eval_every=5, warmup_steps=5,
                               patience=100, rank_weight=rank_weight)
    full = new_estimator(positional_toy)
    train_estimator(full, toy_hidden, toy_labels, positional_toy.mask_id, cfg,
                    tmp_path / "a", log=lambda s: None)

    def stop_at_17(step, total):
        if step == 17:
            raise Interrupt

    part = new_estimator(positional_toy)
    with pytest.raises(Interrupt):
        train_estimator(part, toy_hidden, toy_labels, positional_toy.mask_id, cfg,
                        tmp_path / "b", log=lambda s: None, progress=stop_at_17)
    logs = []
    res = train_estimator(new_estimator(positional_toy), toy_hidden, toy_labels,
                          positional_toy.mask_id, cfg, tmp_path / "b", resume=True,
                          log=logs.append)
    assert logs[0].startswith("resumed at step 15")
    assert res["steps"] == 33
    a = load_file(str(tmp_path / "a" / "best" / "estimator.safetensors"))
    b = load_file(str(tmp_path / "b" / "best" / "estimator.safetensors"))
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    with pytest.raises(UnmaskError, match="other training settings"):
        train_estimator(new_estimator(positional_toy), toy_hidden, toy_labels,
                        positional_toy.mask_id, EstimatorTrainConfig(max_epochs=4),
                        tmp_path / "b", resume=True)
    with pytest.raises(UnmaskError, match="no checkpoint"):
        train_estimator(new_estimator(positional_toy), toy_hidden, toy_labels,
                        positional_toy.mask_id, cfg, tmp_path / "c", resume=True)
    # the time budget is per run: a resume may be given more (here: none) of it
    more_time = dataclasses.replace(cfg, max_time_s=3600.0)
    res = train_estimator(new_estimator(positional_toy), toy_hidden, toy_labels,
                          positional_toy.mask_id, more_time, tmp_path / "b", resume=True)
    assert res["steps"] == 33


def test_a_checkpoint_older_than_a_config_field_still_resumes(positional_toy, toy_labels,
                                                              toy_hidden, tmp_path):
    cfg = EstimatorTrainConfig(batch_size=32, max_epochs=2, eval_every=5, warmup_steps=5)
    train_estimator(new_estimator(positional_toy), toy_hidden, toy_labels,
                    positional_toy.mask_id, cfg, tmp_path / "a", log=lambda s: None)
    ckpt = tmp_path / "a" / "checkpoint.pt"
    state = torch.load(ckpt, weights_only=True)
    # as written before these fields existed: their defaults are what the run used
    del state["estimator_config"]["extra_layers"], state["train_config"]["rank_samples"]
    torch.save(state, ckpt)
    res = train_estimator(new_estimator(positional_toy), toy_hidden, toy_labels,
                          positional_toy.mask_id, cfg, tmp_path / "a", resume=True,
                          log=lambda s: None)
    assert res["steps"] == state["step"]
    wider = MIEstimator(dataclasses.replace(new_estimator(positional_toy).config, d=8))
    with pytest.raises(UnmaskError, match="another estimator configuration"):
        train_estimator(wider, toy_hidden, toy_labels, positional_toy.mask_id, cfg,
                        tmp_path / "a", resume=True)


def test_labels_from_another_model_are_refused(positional_toy, toy_labels):
    other = type(positional_toy)(n=5, v=3, seed=2, concentration=0.3)
    with pytest.raises(UnmaskError, match="labels: probed on model"):
        toy_labels.check_model(other)
    toy_labels.check_model(positional_toy)


def _symmetric_toy(n=4, v=3):
    """An exact toy MDM whose joint is invariant under every permutation of positions and of
    token values (a Dirichlet draw averaged over the group)."""
    import itertools

    from unmask import ExactJointMDM

    torch.manual_seed(3)
    joint = torch.distributions.Dirichlet(torch.full((v ** n,), 0.3)).sample().double()
    joint = joint.view((v,) * n)
    total = torch.zeros_like(joint)
    for sigma in itertools.permutations(range(n)):
        moved = joint.permute(sigma)
        for tau in itertools.permutations(range(v)):
            t = moved
            for axis in range(n):
                t = t.index_select(axis, torch.tensor(tau))
            total += t
    return ExactJointMDM(total / total.sum())


def test_moved_labels_are_the_labels_of_moved_contexts():
    """Under a symmetry of the joint, moving a context and its MI matrix gives exactly the
    probed MI of the moved context."""
    import numpy as np

    model = _symmetric_toy()
    mask = model.mask_id
    rng = np.random.default_rng(0)
    tokens = torch.from_numpy(rng.integers(0, 3, (12, 4)))
    tokens[torch.from_numpy(rng.random((12, 4)) < 0.6)] = mask
    labels = LabelSet(tokens, model.conditional_mi(tokens).float(), torch.arange(12),
                      model.fingerprint())
    index = torch.tensor([0, 3, 3, 7, 11])
    perm = np.stack([rng.permutation(4) for _ in index])
    tmap = np.stack([np.append(rng.permutation(3), mask) for _ in index])
    moved = labels.moved(index, perm, tmap)
    assert torch.equal(moved.groups, index)
    assert (moved.tokens == mask).sum() == (tokens[index] == mask).sum()
    torch.testing.assert_close(moved.mi, model.conditional_mi(moved.tokens).float(),
                               atol=1e-6, rtol=0)
    # a real move: not the unmoved matrices
    assert not torch.allclose(moved.mi, labels.mi[index])


def test_augmented_training_set_moves_only_training_contexts(toy_labels):
    import numpy as np

    from unmask.mi.estimator_train import augmented_training_set

    def shift(count, seed):  # cyclic shift of positions: a valid map, whatever the joint
        n = toy_labels.tokens.shape[1]
        perm = (np.arange(n)[None] + 1 + np.arange(count)[:, None] % (n - 1)) % n
        return perm, np.tile(np.arange(10), (count, 1))

    cfg = EstimatorTrainConfig(augment=2, held_out=0.3)
    out = augmented_training_set(toy_labels, cfg, shift)
    train = ~held_out_mask(toy_labels.groups, 0.3)
    m = len(toy_labels)
    assert len(out) == m + 2 * int(train.sum())
    assert torch.equal(out.tokens[:m], toy_labels.tokens)
    # every copy belongs to a training group, so the split puts it on the training side
    assert not held_out_mask(out.groups[m:], 0.3).any()
    assert set(out.groups[m:].tolist()) == set(toy_labels.groups[train].tolist())
    assert augmented_training_set(toy_labels, EstimatorTrainConfig(), None) is toy_labels
    with pytest.raises(UnmaskError, match="no known symmetry"):
        augmented_training_set(toy_labels, cfg, None)
