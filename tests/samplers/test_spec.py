"""The one sampler spec syntax: NAME[:K=V,...][+verify[=T]][+corrector]."""

import pytest

from unmask import UnmaskError, Verified
from unmask.samplers.spec import SamplerSpec, parse_spec


@pytest.mark.parametrize("text, name, params, verify, corrected", [
    ("confidence", "confidence", {}, None, False),
    ("eb:gamma=0.1", "eb", {"gamma": 0.1}, None, False),
    ("eb:gamma=0.1,order=confidence", "eb", {"gamma": 0.1, "order": "confidence"}, None, False),
    ("mi-guided:gamma=1.0,order=confidence+verify=0.002", "mi-guided",
     {"gamma": 1.0, "order": "confidence"}, 0.002, False),
    ("topk:k=7+corrector", "topk", {"k": 7}, None, True),
    ("topk+verify", "topk", {}, 1.0, False),
    ("topk+verify=0", "topk", {}, 0.0, False),
    ("eb:gamma=1e+0", "eb", {"gamma": 1.0}, None, False),
    ("eb:gamma=1e+0+verify=1e-3", "eb", {"gamma": 1.0}, 0.001, False),
    ("info-gain:tau_tok=none,bypass=0.9", "info-gain", {"tau_tok": None, "bypass": 0.9},
     None, False),
    ("mi-guided:free_max=true", "mi-guided", {"free_max": True}, None, False),
])
def test_specs_parse(text, name, params, verify, corrected):
    spec = parse_spec(text)
    assert (spec.name, spec.params, spec.verify, spec.corrected) == (name, params, verify,
                                                                    corrected)
    assert parse_spec(spec.text) == spec  # the canonical text reads back
    sampler = spec.build()
    assert isinstance(sampler, Verified) == (verify is not None)
    inner = sampler.inner if verify is not None else sampler
    assert inner.name == name and all(getattr(inner, k) == v for k, v in params.items())


def test_labels_name_every_part():
    assert parse_spec("eb:gamma=0.1,order=confidence").label == "eb gamma=0.1 order=confidence"
    assert parse_spec("topk:k=7+corrector").label == "topk k=7 +corrector"
    assert parse_spec("eb+verify").label == "eb +verify"
    assert parse_spec("eb+verify=0.002").label == "eb +verify=0.002"
    assert SamplerSpec("eb", {"gamma": 0.1}, label="eb γ=0.1").label == "eb γ=0.1"


@pytest.mark.parametrize("text, needle", [
    ("", "expected a sampler name at position 0"),
    (":k=3", "expected a sampler name at position 0"),
    ("nosuch", "unknown name 'nosuch'"),
    ("topk:", "expected a parameter name at position 5"),
    ("topk:k", "expected '=' after 'k' at position 6"),
    ("topk:k=", "expected a value for 'k' at position 7"),
    ("topk:k=1,", "expected a parameter name at position 9"),
    ("topk:k=1,k=2", "'k' given twice"),
    ("topk:kk=1", "unknown parameter 'kk'"),
    ("eb:gamma=abc", "gamma: expected a number, got 'abc'"),
    ("topk:k=2.5", "k: expected an integer, got 2.5"),
    ("topk+verfy", r"expected \+verify\[=T\] or \+corrector at position 4"),
    ("topk+verify+verify", r"\+verify given twice"),
    ("topk+corrector+corrector", r"\+corrector given twice"),
    ("topk+verify=2", r"takes a tolerance in \[0, 1\]"),
    ("topk+verify=", r"takes a tolerance in \[0, 1\]"),
    ("topk+verify+corrector", "cannot be combined"),
    ("lookum+verify", "evaluates its next state itself"),
    ("topk k=3", "at position 4"),
])
def test_bad_specs_say_what_and_where(text, needle):
    with pytest.raises(UnmaskError, match=needle):
        parse_spec(text)


def test_a_spec_must_be_text():
    with pytest.raises(UnmaskError, match="sampler spec: expected a string, got NoneType"):
        parse_spec(None)
    with pytest.raises(UnmaskError, match="params: expected a dict"):
        SamplerSpec("eb", [("gamma", 0.1)])
