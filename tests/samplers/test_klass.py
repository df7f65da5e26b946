"""KLASS on the exact toy MDM: reveal sets follow a hand-run of the KL-stability rule."""

import math

import pytest
import torch

from unmask import DecodeConfig, ExactJointMDM, UnmaskError, decode, make_sampler


def hand_klass(model, x, kl_th, conf_th, history, k=1):
    """Decode one row (N,) by the KLASS rule from exact conditionals; returns reveal steps."""
    x = x.clone()
    n = x.shape[0]
    kls = []  # newest first, each (N,)
    prev = None
    step_of = [-1] * n
    t = 0
    while (x == model.mask_id).any():
        p = model.conditionals(x[None])[0]  # (N, V)
        masked = x == model.mask_id
        if prev is None:
            kl = torch.full((n,), math.inf, dtype=torch.float64)
        else:
            kl = torch.zeros(n, dtype=torch.float64)
            for i in range(n):
                for v in range(p.shape[1]):
                    if p[i, v] > 0:
                        kl[i] += p[i, v] * (math.log(p[i, v]) - (math.log(prev[i, v])
                                                                  if prev[i, v] > 0
                                                                  else -math.inf))
        kls = [kl] + kls[: history - 1]
        conf, tok = p.max(-1)
        stable = [len(kls) == history and all(float(h[i]) < kl_th for h in kls)
                  for i in range(n)]
        reveal = [i for i in range(n) if masked[i] and stable[i] and conf[i] > conf_th]
        if not reveal:
            order = sorted((i for i in range(n) if masked[i]), key=lambda i: (-conf[i], i))
            reveal = order[:k]
        for i in reveal:
            x[i] = int(tok[i])
            step_of[i] = t
        prev = p
        t += 1
    return x.tolist(), step_of


@pytest.mark.parametrize("kl_th,conf_th,history", [(0.05, 0.6, 1), (0.5, 0.5, 2),
                                                   (math.inf, 0.0, 2)])
def test_reveals_follow_the_rule(kl_th, conf_th, history):
    m = ExactJointMDM(n=6, v=3, seed=3, concentration=0.4)
    x = torch.full((3, 6), m.mask_id)
    x[1, 0] = int(m.conditionals(x[1:2])[0, 0].argmax())
    x[2, 5] = int(m.conditionals(x[2:3])[0, 5].argmax())
    s = make_sampler("klass", kl_threshold=kl_th, conf_threshold=conf_th, history=history)
    res = decode(m, x, s)
    for r in range(3):
        tokens, steps = hand_klass(m, x[r], kl_th, conf_th, history)
        assert res.tokens[r].tolist() == tokens
        assert res.reveal_step[r].tolist() == steps


def test_first_steps_fall_back_to_top_k_then_stable_positions_go_together():
    m = ExactJointMDM(n=6, v=3, seed=3, concentration=0.4)
    x = torch.full((1, 6), m.mask_id)
    res = decode(m, x, make_sampler("klass", kl_threshold=math.inf, conf_threshold=0.0,
                                    history=2, k=2), DecodeConfig(record_history=True))
    revealed = [int((h != m.mask_id).sum()) for h in res.history]
    # two steps of history are needed before anything counts as stable: top-2 twice,
    # then every remaining position clears infinite/zero thresholds at once
    assert revealed == [2, 4, 6]


def test_validation():
    for bad in ({"kl_threshold": -1.0}, {"conf_threshold": 2.0}, {"history": 0}):
        with pytest.raises(UnmaskError, match=next(iter(bad))):
            make_sampler("klass", **bad)
