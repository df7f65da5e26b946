"""generate and infill with a constraint: the completion (not the prompt) or the whole
template; refusals before any pass; the record in each result."""

import json
import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from tiny_text import bpe_tokenizer, char_tokenizer, text_model  # noqa: E402

from unmask import constraints  # noqa: E402
from unmask.errors import UnmaskError  # noqa: E402
from unmask.generate import generate  # noqa: E402
from unmask.infill import infill  # noqa: E402
from unmask.request import DecodeRequest  # noqa: E402

pytest.importorskip("outlines_core")
SCHEMA = {"type": "object", "properties": {"answer": {"type": "integer"}},
          "required": ["answer"]}


@pytest.mark.parametrize("make", [char_tokenizer, bpe_tokenizer])
def test_generate_constrains_the_completion(make):
    model = text_model(make(), max_length=64)
    spec = constraints.json_schema(SCHEMA)
    prompts = ["what is 1", "the cat sat on"]
    gens = generate(model, prompts=prompts, gen_length=24, block_length=8,
                    sampler="eb:gamma=1", constraint=spec)
    for g in gens:
        assert json.loads(g.text).keys() == {"answer"}
        assert g.to_json()["constraint"]["kind"] == "json_schema"
        assert g.constraint["hash"] == spec.hash and g.constraint["cut_passes"] >= 0
    # the same through the request object
    again = generate(model, prompts=prompts, request=DecodeRequest(
        sampler="eb:gamma=1", gen_length=24, block_length=8, constraint=spec))
    assert [g.text for g in again] == [g.text for g in gens]


def test_infill_constrains_the_whole_template():
    model = text_model(char_tokenizer(), max_length=64)
    spec = constraints.regex("the answer is [0-9]+ ")
    gens = infill(model, ["the answer is <mask:3> ", "the answer is <mask:1> "],
                  constraint=spec)
    assert all(re.fullmatch(spec.value, g.text) for g in gens)
    with pytest.raises(UnmaskError, match="row 0: its given tokens cannot be completed"):
        infill(model, ["an answer is <mask:2> "], constraint=spec)


def test_refused_before_any_pass():
    model = text_model(char_tokenizer(), max_length=64)
    with pytest.raises(UnmaskError, match="shortest string takes 12 tokens; the canvas holds 8"):
        generate(model, prompts=["hi"], gen_length=8, constraint=constraints.regex("a{12}"))
    with pytest.raises(UnmaskError, match="min_new_tokens: not with a constraint"):
        generate(model, prompts=["hi"], gen_length=8, min_new_tokens=2,
                 constraint=constraints.regex("a+"))
