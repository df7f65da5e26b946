"""Property: every output of a constrained decode is in the language (``re.fullmatch``,
``jsonschema.validate``), for generated regular expressions and JSON Schemas, random tiny
models over a character and a BPE tokenizer (with and without EOS), every registered sampler
and verified passes, in batches that mix constraints and an unconstrained row. A language
that cannot fit the canvas is refused before decoding, never decoded into a wrong text."""

import importlib.util
import json
import os
import re
import sys
from collections import Counter
from functools import cache
from pathlib import Path

import pytest
import torch

hypothesis = pytest.importorskip("hypothesis")
jsonschema = pytest.importorskip("jsonschema")
pytest.importorskip("outlines_core")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))
from tiny_text import bpe_tokenizer, char_tokenizer, text_model, text_of  # noqa: E402

from unmask import constraints  # noqa: E402
from unmask.constraints.dfa import DFAConstraint  # noqa: E402
from unmask.decode import DecodeConfig, decode  # noqa: E402
from unmask.errors import UnmaskError  # noqa: E402
from unmask.samplers.base import available_samplers, make_sampler  # noqa: E402
from unmask.samplers.verified import Verified  # noqa: E402

COUNTS: Counter = Counter()
N = 14


ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("loop_overhead",
                                               ROOT / "benchmarks" / "loop_overhead.py")
loop_overhead = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(loop_overhead)


@cache
def _model(kind: str, eos: bool, seed: int = 0):
    tok = char_tokenizer() if kind == "char" else bpe_tokenizer()
    return text_model(tok, eos=eos, seed=seed)


def _sampler(name: str, model):
    """A registered sampler with the parameters it needs (an untrained MI estimator for
    mi-guided and demask: loop_overhead's), or one in verified passes."""
    if name.endswith("+verify"):
        return Verified(_sampler(name.removesuffix("+verify"), model))
    return make_sampler(name, **loop_overhead.PARAMS.get(name, lambda _: {})(model))


_ATOMS = st.sampled_from(["a", "b", "1", " ", "[ab]", "[0-9]", "(ab|ba)", "(a|1 )"])
_QUANT = st.sampled_from(["", "", "?", "*", "+", "{1,2}"])


@st.composite
def regexes(draw, depth=2):
    parts = draw(st.lists(st.tuples(_ATOMS, _QUANT), min_size=1, max_size=3))
    body = "".join(a + q for a, q in parts)
    if depth and draw(st.booleans()):
        body = f"({body}|{draw(regexes(depth=depth - 1))})"
    return body


_PROPS = {"integer": {"type": "integer"}, "boolean": {"type": "boolean"},
          "enum": {"enum": ["ab", "b1"]}, "string": {"type": "string", "maxLength": 2}}


@st.composite
def schemas(draw):
    names = draw(st.lists(st.sampled_from(["a", "b"]), min_size=1, max_size=2, unique=True))
    props = {n: _PROPS[draw(st.sampled_from(sorted(_PROPS)))] for n in names}
    return {"type": "object", "properties": props, "required": names}


def _valid(spec, text: str) -> bool:
    if spec.kind == "regex":
        return re.fullmatch(spec.value, text) is not None
    if spec.kind == "choice":
        return text in spec.value
    try:
        jsonschema.validate(json.loads(text), spec.schema)
    except (json.JSONDecodeError, jsonschema.ValidationError):
        return False
    return True


SAMPLERS = available_samplers() + ["confidence+verify", "eb+verify", "threshold+verify"]


@settings(max_examples=int(os.environ.get("UNMASK_PROPERTY_EXAMPLES", 25)), deadline=None,
          derandomize=True, suppress_health_check=list(HealthCheck))
@given(pattern=regexes(), schema=schemas(), kind=st.sampled_from(["char", "bpe"]),
       eos=st.booleans(), sampler=st.sampled_from(SAMPLERS), temperature=st.sampled_from([0, 1]),
       seed=st.integers(0, 1000), choices=st.lists(st.sampled_from(["ab", "b", "1a1", "ba b"]),
                                                   min_size=1, max_size=3, unique=True))
def test_every_output_is_in_the_language(pattern, schema, kind, eos, sampler, temperature,
                                         seed, choices):
    model = _model(kind, eos)
    if eos:
        specs = [constraints.regex(pattern), constraints.json_schema(schema),
                 constraints.choice(choices), None]
    else:  # the text fills the canvas: a tail that takes any length
        specs = [constraints.regex(f"({pattern})[ab]*"), None]
    size = N + 12 if eos else N  # room for JSON
    x = torch.full((len(specs), size), model.mask_id)
    try:
        out = decode(model, x, _sampler(sampler, model), DecodeConfig(temperature=temperature),
                     seed=seed, constraint=DFAConstraint(specs))
    except UnmaskError as exc:  # refused before decoding: a language that cannot fit
        assert "\n" not in str(exc)
        COUNTS["refused"] += 1
        return
    assert not bool((out.tokens == model.mask_id).any())
    assert out.stats["dead_end"].sum() == 0
    for spec, row in zip(specs, out.tokens.tolist(), strict=True):
        if spec is None:
            continue
        text = text_of(model, row)
        if model.eos_ids:  # after the first EOS only EOS
            cut = next((i for i, t in enumerate(row) if t in model.eos_ids), len(row))
            assert all(t in model.eos_ids for t in row[cut:])
        assert _valid(spec, text), (spec, text, sampler)
        COUNTS[f"valid {spec.kind}"] += 1
    COUNTS[f"sampler {sampler}"] += 1
    COUNTS["decodes"] += 1


def test_report_counts():
    """Print what the property test covered (``pytest -s``); some batches must decode."""
    print("\nconstraint property counts:", dict(sorted(COUNTS.items())))
    if COUNTS:
        assert COUNTS["decodes"] > 0
