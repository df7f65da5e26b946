"""PC-Sampler: calibrated scores by hand, the position prior, frequency tables."""

import json
import math

import pytest
import torch

from unmask import DecodeConfig, ExactJointMDM, UnmaskError, decode, make_sampler
from unmask.samplers.pc import frequency_table


def hand_first_choice(model, x, f, decay, alpha):
    p = model.conditionals(x[None])[0]
    conf, tok = p.max(-1)
    masked = (x == model.mask_id).nonzero().flatten().tolist()
    f = f / f[: model.v].sum()
    score = {i: math.exp(-decay * (i - masked[0]))
             * min(-float(conf[i]) * math.log(float(f[tok[i]])), alpha) for i in masked}
    return max(masked, key=lambda i: (score[i], -i))


def test_uniform_frequencies_without_position_prior_is_confidence(toy):
    x = torch.full((3, 5), toy.mask_id)
    x[1, 3] = int(toy.conditionals(x[1:2])[0, 3].argmax())
    a = decode(toy, x, make_sampler("pc", position_decay=0.0))
    b = decode(toy, x, "confidence")
    assert torch.equal(a.tokens, b.tokens) and torch.equal(a.reveal_step, b.reveal_step)


@pytest.mark.parametrize("decay,alpha", [(0.0, 10.0), (0.25, 10.0), (0.0, 0.3), (1.0, 0.5)])
def test_first_choice_matches_hand_score(toy, decay, alpha):
    f = torch.tensor([0.7, 0.2, 0.1, 0.0], dtype=torch.float64)  # last id is MASK
    x = torch.full((1, 5), toy.mask_id)
    x[0, 0] = int(toy.conditionals(x)[0, 0].argmax())
    res = decode(toy, x, make_sampler("pc", position_decay=decay, alpha=alpha, frequencies=f),
                 DecodeConfig(record_history=True))
    first = (res.history[0][0] != x[0]).nonzero().flatten().tolist()
    assert first == [hand_first_choice(toy, x[0], f, decay, alpha)]


def test_strong_position_prior_decodes_left_to_right():
    m = ExactJointMDM(n=6, v=3, seed=7)
    res = decode(m, torch.full((2, 6), m.mask_id), make_sampler("pc", position_decay=50.0))
    assert res.reveal_step.tolist() == [list(range(6))] * 2


def test_frequency_table_and_files(tmp_path, toy):
    tokens = torch.tensor([[0, 0, 1, 3], [2, 0, 3, 3]])
    f = frequency_table(tokens, 4, ignore=3)
    assert f.tolist() == [0.6, 0.2, 0.2, 0.0]
    js = tmp_path / "f.json"
    js.write_text(json.dumps(f.tolist()))
    txt = tmp_path / "f.txt"
    txt.write_text("0.6 0.2 0.2 0.0\n")
    x = torch.full((2, 5), toy.mask_id)
    runs = [decode(toy, x, make_sampler("pc", frequencies=src)).tokens for src in (f, str(js),
                                                                                 str(txt))]
    assert torch.equal(runs[0], runs[1]) and torch.equal(runs[0], runs[2])


def test_bad_frequencies_name_the_field(tmp_path, toy):
    for bad in ([-1.0, 1.0, 1.0, 0.0], [0.0, 0.0], [[1.0]], str(tmp_path / "missing.json")):
        with pytest.raises(UnmaskError, match="frequencies"):
            make_sampler("pc", frequencies=bad)
    junk = tmp_path / "junk.txt"
    junk.write_text("a b c")
    with pytest.raises(UnmaskError, match="frequencies"):
        make_sampler("pc", frequencies=str(junk))
    with pytest.raises(UnmaskError, match="frequencies: table has 3 entries"):
        decode(toy, torch.full((1, 5), toy.mask_id), make_sampler("pc", frequencies=[1, 1, 1]))
    with pytest.raises(UnmaskError, match="position_decay"):
        make_sampler("pc", position_decay=-1.0)
    with pytest.raises(UnmaskError, match="alpha"):
        make_sampler("pc", alpha=0.0)
