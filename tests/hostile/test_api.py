"""Hostile input to the Python API: every call either works or raises UnmaskError with one line
naming what was wrong; never another exception, never a silently wrong result."""

import math

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from unmask import (
    DecodeConfig,
    ExactJointMDM,
    UnmaskError,
    Verified,
    available_samplers,
    decode,
    make_sampler,
    parse_spec,
)
from unmask.hooks import corrector_hooks
from unmask.models.auto import load_model

SETTINGS = settings(max_examples=40, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture])


@pytest.fixture(scope="module")
def toy():
    return ExactJointMDM(n=5, v=3, seed=1, concentration=0.3)


def one_line_error(call):
    """Run ``call``; return None when it worked, else the UnmaskError's message (one line)."""
    try:
        call()
    except UnmaskError as e:
        message = str(e)
        assert message and "\n" not in message, message
        return message
    return None


@pytest.mark.parametrize("tokens, field", [
    ([[0, 1, 3, 3, 3]], "tokens"),                      # a list, not a tensor
    (torch.tensor([0, 1, 3, 3, 3]), "tokens"),          # 1-D
    (torch.zeros(1, 5), "tokens"),                      # float
    (torch.tensor([[0, 1, 9, 3, 3]]), "tokens"),        # id outside the vocabulary
    (torch.tensor([[0, 1, -1, 3, 3]]), "tokens"),       # negative id
    (torch.full((1, 6), 3), "tokens"),                  # longer than the model allows
])
def test_bad_tokens_are_refused_naming_tokens(toy, tokens, field):
    message = one_line_error(lambda: decode(toy, tokens, "confidence"))
    assert message is not None and message.startswith(field), message


@pytest.mark.parametrize("shape", [(0, 5), (2, 0)])
def test_empty_batches_decode_to_empty_results(toy, shape):
    res = decode(toy, torch.full(shape, toy.mask_id), "confidence")
    assert res.tokens.shape == shape and res.nfe.shape == (shape[0],)
    assert int(res.nfe.sum()) == 0


@pytest.mark.parametrize("sampler, config, hooks, field", [
    (None, None, (), "sampler"),
    ("no-such-sampler", None, (), "sampler"),
    ("confidence", {"temperature": 1.0}, (), "config"),
    ("confidence", None, ("corrector",), "hooks"),
    ("confidence+corrector", None, (), "sampler"),
])
def test_bad_arguments_name_the_field(toy, sampler, config, hooks, field):
    x = torch.full((1, 5), toy.mask_id)
    message = one_line_error(lambda: decode(toy, x, sampler, config, hooks=hooks))
    assert message is not None and field in message, message


@pytest.mark.parametrize("seed", [2**64, -(2**64), 1.5, "0", True, torch.zeros(3)])
def test_bad_seeds_are_refused(toy, seed):
    x = torch.full((2, 5), toy.mask_id)
    message = one_line_error(lambda: decode(toy, x, "confidence", seed=seed))
    assert message is not None and "seed" in message, message


def test_a_numpy_seed_is_an_integer(toy):
    x = torch.full((2, 5), toy.mask_id)
    a = decode(toy, x, "uniform", DecodeConfig(temperature=1.0), seed=np.int64(3))
    b = decode(toy, x, "uniform", DecodeConfig(temperature=1.0), seed=3)
    assert torch.equal(a.tokens, b.tokens)


@pytest.mark.parametrize("kwargs, field", [
    ({"temperature": math.inf}, "temperature"),
    ({"temperature": math.nan}, "temperature"),
    ({"temperature": -0.5}, "temperature"),
    ({"temperature": "1"}, "temperature"),
    ({"block_size": 0}, "block_size"),
    ({"block_size": True}, "block_size"),
    ({"block_size": 2.0}, "block_size"),
    ({"record_history": 1}, "record_history"),
])
def test_decode_config_validates_each_field(kwargs, field):
    message = one_line_error(lambda: DecodeConfig(**kwargs))
    assert message is not None and message.startswith(field), message


@pytest.mark.parametrize("name, params, field", [
    ("eb", {"gamma": "0.1"}, "gamma"),
    ("eb", {"gamma": True}, "gamma"),
    ("topk", {"k": 2.5}, "k"),
    ("topk", {"k": True}, "k"),
    ("topk", {"k": 0}, "k"),
    ("threshold", {"tau": math.nan}, "tau"),
    ("eb", {"no_such": 1}, "no_such"),
])
def test_make_sampler_names_the_field(name, params, field):
    message = one_line_error(lambda: make_sampler(name, **params))
    assert message is not None and field in message, message


def test_numpy_integers_are_integers():
    assert make_sampler("topk", k=np.int64(3)).k == 3


def test_verified_refuses_what_it_cannot_check():
    assert one_line_error(lambda: Verified(make_sampler("info-gain"))) is not None
    assert one_line_error(lambda: Verified(make_sampler("confidence"), tolerance=2.0))
    assert one_line_error(lambda: Verified(Verified(make_sampler("confidence")))) is not None


def test_corrector_hooks_validate_their_arguments():
    class Corrector:
        def check_model(self, model):
            pass

        def wrong_probs(self, output, tokens):
            return torch.zeros(tokens.shape)

    for kwargs in ({"threshold": 1.5}, {"threshold": math.nan}, {"max_remasks": -1},
                   {"max_remasks": True}):
        assert one_line_error(lambda kw=kwargs: corrector_hooks(Corrector(), **kw)) is not None


@SETTINGS
@given(st.text(max_size=40))
def test_any_spec_text_parses_or_is_one_line(text):
    message = one_line_error(lambda: parse_spec(text))
    if message is not None:
        assert message.startswith("sampler"), message


SPEC_PIECES = st.sampled_from(available_samplers() + ["x", "", "eb:", ":", "+verify", "+", ","])
VALUES = st.sampled_from(["1", "0", "-1", "1e9", "nan", "inf", "none", "true", "abc", "",
                          "0.5", "1e+3", "=", "+corrector"])


@SETTINGS
@given(SPEC_PIECES, st.lists(st.tuples(st.sampled_from(["k", "gamma", "tau", "order", "steps",
                                                        "x"]), VALUES), max_size=3),
       st.sampled_from(["", "+verify", "+verify=0", "+verify=2", "+corrector", "+verify+verify",
                        "+verify=0.1+corrector"]))
def test_structured_specs_parse_build_and_decode_or_are_one_line(toy, name, params, modifier):
    text = name + (":" + ",".join(f"{k}={v}" for k, v in params) if params else "") + modifier
    spec = None

    def parse():
        nonlocal spec
        spec = parse_spec(text)

    if one_line_error(parse) is not None or spec.corrected:
        return
    x = torch.tensor([[0, toy.mask_id, toy.mask_id, 2, toy.mask_id]])
    message = one_line_error(lambda: decode(toy, x, spec.build()))
    assert message is None or spec.name in ("mi-guided", "demask", "dapd"), (text, message)


@pytest.mark.parametrize("name", ["", "   ", "no-such-model", "../../etc", "\x00", "sudoku/..",
                                  "/nonexistent/folder"])
def test_load_model_refuses_in_one_line(name):
    message = one_line_error(lambda: load_model(name))
    assert message is not None and "model" in message, message


def test_load_model_refuses_a_model_of_another_task():
    message = one_line_error(lambda: load_model("protein", task="sudoku"))
    assert message is not None and "sudoku" in message, message
