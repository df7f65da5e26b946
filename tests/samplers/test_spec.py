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
    ("topk+verfy", r"expected a modifier \(\+verify\[=T\], \+corrector, \+ramp, \+wino, \+remdm\) "
                   "at position 4"),
    ("topk+verify,prefixes=some", "verify prefixes: expected one of"),
    ("topk+verify,max_draft=0", "max_draft: must be None or an integer >= 1"),
    ("topk+verify,depth=2", "unknown option 'depth'"),
    ("topk+wino=2.0", r"tau2: must be in \(0, 1\]"),
    ("topk+wino=0.9,depth=2", r"\+wino: unknown option"),
    ("topk+remdm=0.1,strategy=bold", "strategy: expected one of"),
    ("topk+wino+wino", r"\+wino given twice"),
    ("topk+wino=", r"expected a value for \+wino"),
    ("topk+verify+wino", "cannot be combined"),
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


@pytest.mark.parametrize("text, tolerance, prefixes, max_draft", [
    ("eb:gamma=1.0,order=confidence+verify=0.002,prefixes=doubling", 0.002, "doubling", None),
    ("topk:k=9+verify,max_draft=3", 1.0, "all", 3),
    ("topk:k=9+verify=0,prefixes=doubling,max_draft=4", 0.0, "doubling", 4),
])
def test_verify_options_are_said_in_the_spec(text, tolerance, prefixes, max_draft):
    spec = parse_spec(text)
    assert parse_spec(spec.text) == spec
    sampler = spec.build()
    assert isinstance(sampler, Verified)
    assert (sampler.tolerance, sampler.prefixes, sampler.max_draft) == (tolerance, prefixes,
                                                                       max_draft)
    assert f"prefixes={prefixes}" in spec.label or prefixes == "all"


def test_hook_modifiers_build_their_hooks():
    from unmask.hooks import ReMDMRemask, WinoVerify
    from unmask.samplers.spec import WithHooks

    spec = parse_spec("threshold:tau=0.5+wino=0.9,max_checks=4+remdm=0.05,strategy=cap")
    assert spec.hooks == {"wino": {"tau2": 0.9, "max_checks": 4},
                          "remdm": {"eta": 0.05, "strategy": "cap"}}
    assert parse_spec(spec.text) == spec
    assert spec.label == ("threshold tau=0.5 +wino=0.9,max_checks=4 "
                          "+remdm=0.05,strategy=cap")
    sampler = spec.build()
    assert isinstance(sampler, WithHooks) and sampler.inner.name == "threshold"
    wino, remdm = sampler.decode_hooks()
    assert isinstance(wino, WinoVerify) and (wino.tau2, wino.max_checks) == (0.9, 4)
    assert isinstance(remdm, ReMDMRemask) and (remdm.eta, remdm.strategy) == (0.05, "cap")
    # each build gets its own hooks (they hold per-decode state)
    assert spec.build().decode_hooks()[0] is not wino


def test_a_hook_modifier_decodes_as_the_hook_passed_by_hand(toy):
    import torch

    from unmask import decode
    from unmask.hooks import ReMDMRemask, WinoVerify

    x = torch.full((4, 5), toy.mask_id)
    for spec, hook in [("threshold:tau=0.5+wino=0.9,max_checks=2", WinoVerify(0.9, 2)),
                       ("topk:k=2+remdm=0.4,strategy=cap,max_remasks=2",
                        ReMDMRemask(eta=0.4, strategy="cap", max_remasks=2))]:
        by_spec = decode(toy, x, spec, seed=3)
        by_hand = decode(toy, x, spec.split("+")[0], hooks=(hook,), seed=3)
        assert torch.equal(by_spec.tokens, by_hand.tokens)
        assert torch.equal(by_spec.nfe, by_hand.nfe)
        assert torch.equal(by_spec.sequences, by_hand.sequences)
        assert torch.equal(by_spec.stats["remasked"], by_hand.stats["remasked"])
