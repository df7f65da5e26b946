"""Training on exact labels of the toy MDM: learning, early stopping, resume."""

import json

import pytest
import torch
from safetensors.torch import load_file

from unmask import UnmaskError
from unmask.mi.estimator import EstimatorConfig, MIEstimator
from unmask.mi.estimator_train import (
    EstimatorTrainConfig,
    LabelSet,
    compute_features,
    held_out_loss,
    held_out_mask,
    train_estimator,
)


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
    from unmask.decode import entropy_from_log_probs, real_log_probs

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
    assert len(lines) == 30 and sum(r.get("best", False) for r in lines) >= 1


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


def test_resume_reproduces_an_uninterrupted_run(positional_toy, toy_labels, toy_hidden,
                                                tmp_path):
    cfg = EstimatorTrainConfig(batch_size=32, max_epochs=3, eval_every=5, warmup_steps=5,
                               patience=100)
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


def test_labels_from_another_model_are_refused(positional_toy, toy_labels):
    other = type(positional_toy)(n=5, v=3, seed=2, concentration=0.3)
    with pytest.raises(UnmaskError, match="labels: probed on model"):
        toy_labels.check_model(other)
    toy_labels.check_model(positional_toy)
