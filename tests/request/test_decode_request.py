"""The one typed decoding request: validation, JSON round trip, and equal objects from every
entry point (the CLI's flags, lm-eval's model_args, a Python caller)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from unmask import constraints
from unmask.cli import build_parser
from unmask.commands.flags.request import request_from_args
from unmask.commands.flags.sampler import sampler_text
from unmask.errors import UnmaskError
from unmask.request import SETTINGS, DecodeRequest


def test_llada_names_and_canonical_spec():
    r = DecodeRequest(sampler=" low_confidence ")
    assert r.sampler == "confidence" and r.spec.name == "confidence"
    r = DecodeRequest(sampler="eb:gamma=0.10,order=confidence+verify=0.5")
    assert r.sampler == "eb:gamma=0.1,order=confidence+verify=0.5"
    assert DecodeRequest(sampler="topk_margin").sampler == "margin"


@pytest.mark.parametrize("settings, message", [
    ({"temperature": -1}, "temperature: must be a finite number >= 0"),
    ({"temperature": float("nan")}, "temperature: must be a finite number >= 0"),
    ({"gen_length": 0}, "gen_length: must be an integer >= 1"),
    ({"gen_length": 8, "block_length": 3}, "block_length: 3 does not divide gen_length 8"),
    ({"min_new_tokens": 9, "gen_length": 8}, r"min_new_tokens: must be an integer in \[0, "),
    ({"steps": 4, "sampler": "eb:gamma=0.1"}, "steps: sampler 'eb' chooses how many"),
    ({"cache_kv": "full"}, "cache_kv: expected None or one of prefix, dual"),
    ({"confidence": "mean"}, "confidence: expected one of draw, max"),
    ({"seed": -1}, r"seed: must be an integer in \[0, 2\*\*62\]"),
    ({"seed": True}, "seed: must be an integer"),
    ({"stop_at_eos": "false"}, "stop_at_eos: must be True or False"),
    ({"sampler": "nope"}, "nope"),
    ({"constraint": "a|b"}, "constraint: expected a constraint"),
])
def test_refusals_name_the_setting(settings, message):
    with pytest.raises(UnmaskError, match=message):
        DecodeRequest(**settings)


def test_unknown_settings_are_refused():
    with pytest.raises(UnmaskError, match="sampeler: not a decoding setting"):
        DecodeRequest.from_settings(None, sampeler="eb")
    with pytest.raises(UnmaskError, match="request: unknown setting 'sampeler'"):
        DecodeRequest.from_json({"sampeler": "eb"})
    with pytest.raises(UnmaskError, match="request: unknown setting 'a'"):
        DecodeRequest.from_json({1: 2, "a": 3})  # keys of two types: not sorted together
    with pytest.raises(UnmaskError, match="not both"):
        DecodeRequest.from_settings(DecodeRequest(), seed=3)
    with pytest.raises(UnmaskError, match="x: not a decoding setting"):
        DecodeRequest().replace(x=1)


def test_replace_keeps_the_parsed_spec(monkeypatch):
    r = DecodeRequest(sampler="eb:gamma=0.10+verify=0.5", temperature=0.5)
    calls = []
    import unmask.request as request_module

    real = request_module.sampler_spec
    monkeypatch.setattr(request_module, "sampler_spec",
                        lambda text: calls.append(text) or real(text))
    copy = r.replace(seed=7)
    assert calls == [] and copy.spec is r.spec and copy.sampler == r.sampler
    assert copy == DecodeRequest(sampler="eb:gamma=0.1+verify=0.5", temperature=0.5, seed=7)
    calls.clear()
    assert r.replace(sampler="margin").spec.name == "margin" and calls == ["margin"]
    # a parsed spec is a sampler setting of its own, kept in its canonical text
    assert DecodeRequest(sampler=r.spec).sampler == "eb:gamma=0.1+verify=0.5"


def test_steps_split_over_blocks():
    r = DecodeRequest(sampler="confidence", steps=8, gen_length=16, block_length=4)
    assert r.build_sampler(4).steps == 2
    with pytest.raises(UnmaskError, match="steps: 8 is not a multiple of the 3 blocks"):
        r.build_sampler(3)
    # a fresh sampler each time: per-decode state is never shared
    assert r.build_sampler(4) is not r.build_sampler(4)


def test_a_sampler_is_built_once_for_the_checks_and_the_first_decode(monkeypatch):
    import copy
    import pickle

    from unmask.samplers.spec import SamplerSpec

    made = []
    real = SamplerSpec._make
    monkeypatch.setattr(SamplerSpec, "_make", lambda self: made.append(1) or real(self))
    r = DecodeRequest(sampler="confidence", steps=8, gen_length=16, block_length=4)
    assert len(made) == 1  # the spec's check and the check of steps over the blocks: one
    first = r.build_sampler(4)
    assert len(made) == 1 and first.steps == 2  # handed out, not built again
    second = r.build_sampler(4)
    assert len(made) == 2 and second is not first and second.steps == 2  # then fresh ones
    third = r.replace(seed=1).build_sampler(4)
    assert third is not first and third is not second
    spec = SamplerSpec.parse("eb:gamma=0.5")
    built = [spec.build(), spec.build(), copy.deepcopy(spec).build(),
             pickle.loads(pickle.dumps(spec)).build()]
    assert len({id(b) for b in built}) == 4 and len(made) == 7
    assert copy.copy(spec) == spec and pickle.loads(pickle.dumps(spec)).text == spec.text
    # a parameter set after parsing (a bench's --estimator) is the one built
    changed = SamplerSpec.parse("eb:gamma=0.5")
    changed.params["gamma"] = 0.25
    assert changed.build().gamma == 0.25

SPECS = ["confidence", "eb:gamma=0.1", "topk:k=3", "threshold:tau=0.9",
         "eb:gamma=1.0+verify=0.03,prefixes=doubling", "threshold:tau=0.7+wino=0.9"]
CONSTRAINTS = [None, constraints.regex(r"[0-9]{2,4}"), constraints.choice("yes", "no"),
               constraints.json_schema({"type": "object", "properties": {
                   "answer": {"type": "integer"}}, "required": ["answer"]})]


@settings(max_examples=60, deadline=None)
@given(sampler=st.sampled_from(SPECS), temperature=st.sampled_from([0, 0.5, 1.5]),
       seed=st.integers(0, 2**62), gen_length=st.sampled_from([None, 8, 64]),
       block=st.sampled_from([None, 8]), batch=st.one_of(st.none(), st.integers(1, 64)),
       flags=st.lists(st.booleans(), min_size=4, max_size=4),
       cache=st.sampled_from([None, "prefix", "dual"]),
       constraint=st.sampled_from(CONSTRAINTS))
def test_json_round_trip(sampler, temperature, seed, gen_length, block, batch, flags, cache,
                         constraint):
    r = DecodeRequest(sampler=sampler, temperature=temperature, seed=seed,
                      gen_length=gen_length, block_length=block, batch_size=batch,
                      stop_at_eos=flags[0], chat_template=flags[1], batch_invariant=flags[2],
                      compile=flags[3], cache_kv=cache, constraint=constraint)
    data = json.loads(json.dumps(r.to_json()))
    assert set(data) == set(SETTINGS)
    back = DecodeRequest.from_json(data)
    assert back == r and back.to_json() == r.to_json()


def _cli_request(argv: list[str]) -> DecodeRequest:
    args = build_parser().parse_args(argv)
    return request_from_args(args, sampler_text(args))


def test_cli_and_lm_eval_and_python_build_equal_requests():
    pytest.importorskip("lm_eval")
    from unmask.lm_eval_model import parse_model_args, request_from_model_args

    cli = _cli_request(["generate", "--prompt", "hi", "--sampler", "eb:gamma=0.1,order=confidence",
                        "--gen-length", "64", "--block-length", "32", "--temperature",
                        "0.5", "--seed", "7", "--min-new-tokens", "2", "--chat"])
    lm = request_from_model_args(parse_model_args({
        "pretrained": "x", "sampler": "eb:gamma=0.1;order=confidence", "gen_length": "64",
        "block_length": "32", "temperature": "0.5", "seed": "7", "min_new_tokens": "2",
        "chat_template": "true"}))
    py = DecodeRequest(sampler="eb:gamma=0.1,order=confidence", gen_length=64,
                       block_length=32, temperature=0.5, seed=7, min_new_tokens=2,
                       chat_template=True)
    assert cli == lm == py


def test_cli_refusal_names_the_flag():
    with pytest.raises(UnmaskError, match="^--block-length: 3 does not divide gen_length 8"):
        _cli_request(["generate", "--prompt", "hi", "--gen-length", "8", "--block-length", "3"])
    with pytest.raises(UnmaskError, match="^--steps: sampler 'eb' chooses"):
        _cli_request(["generate", "--prompt", "hi", "--sampler", "eb:gamma=0.1", "--steps",
                      "4"])


def test_a_sampler_object_has_no_json_form():
    from unmask.samplers.base import make_sampler

    r = DecodeRequest(sampler=make_sampler("topk", k=2))
    assert r.build_sampler() is r.sampler
    with pytest.raises(UnmaskError, match="sampler: a Sampler object has no JSON form"):
        r.to_json()
