"""Structured outputs through `unmask serve` with the real `openai` client: OpenAI's
``response_format`` (json_object, json_schema) on completions and chat, vLLM's
``structured_outputs`` (regex, choice, json); every answer parses and validates, each equals
`generate` of its prompt alone with its constraint (exact dynamic batching beside
unconstrained requests), and bad input is a 400 with OpenAI's error body before any pass."""

import json
import re
from concurrent.futures import ThreadPoolExecutor

import pytest
from serve_helpers import post

from unmask import constraints
from unmask.generate import generate

jsonschema = pytest.importorskip("jsonschema")
pytest.importorskip("outlines_core")

SCHEMA = {"type": "object", "properties": {"answer": {"type": "integer"}},
          "required": ["answer"]}
#: (prompt, extra body, constraint or None, seed), block 8 of 24 tokens
REQUESTS = [
    ("What is 3 + 4? JSON:", {"response_format": {"type": "json_schema", "json_schema": {
        "name": "a", "schema": SCHEMA, "strict": True}}}, constraints.json_schema(SCHEMA), 1),
    ("Is 7 odd?", {"structured_outputs": {"choice": ["yes", "no"]}},
     constraints.choice("yes", "no"), 2),
    ("What is 9+1", {}, None, 3),
    ("Count to 3:", {"structured_outputs": {"regex": "[0-9]( [0-9])*"}},
     constraints.regex("[0-9]( [0-9])*"), 4),
    ("Give JSON:", {"response_format": {"type": "json_object"}}, constraints.json_object(), 5),
    ("Sum 10 20", {"structured_outputs": {"json": SCHEMA}}, constraints.json_schema(SCHEMA), 6),
]


def _ask(client, req):
    prompt, extra, _, seed = req
    r = client.completions.create(model="text", prompt=prompt, max_tokens=24, seed=seed,
                                  extra_body={"block_length": 8, "sampler": "eb:gamma=0.5",
                                              **extra})
    c = r.choices[0]
    return c.text, c.model_extra["unmask"]


def _valid(spec, text):
    if spec.kind in ("json_schema", "json_object"):
        value = json.loads(text)
        if spec.kind == "json_schema":
            jsonschema.validate(value, spec.schema)
        return isinstance(value, dict)
    return re.fullmatch(spec.value, text) if spec.kind == "regex" else text in spec.value


def test_answers_validate_and_equal_generate_alone(text_server):
    model = text_server.served.model
    client = text_server.client()
    with ThreadPoolExecutor(len(REQUESTS)) as pool:
        got = list(pool.map(lambda req: _ask(client, req), REQUESTS))
    for (prompt, _, spec, seed), (text, stats) in zip(REQUESTS, got, strict=True):
        (alone,) = generate(model, None, prompt, gen_length=24, block_length=8, seed=seed,
                            sampler="eb:gamma=0.5", pad_to_multiple_of=8, constraint=spec)
        assert (text, stats["passes"]) == (alone.text, alone.nfe)
        if spec is None:
            assert "constraint" not in stats
            continue
        assert _valid(spec, text), (spec, text)
        assert stats["constraint"]["kind"] == spec.kind
        assert stats["constraint"]["hash"] == spec.hash


def test_chat_answer_follows_the_schema(text_server):
    r = text_server.client().chat.completions.create(
        model="text", messages=[{"role": "user", "content": "3 + 4 as JSON"}], max_tokens=24,
        seed=0, response_format={"type": "json_schema",
                                 "json_schema": {"name": "a", "schema": SCHEMA}})
    jsonschema.validate(json.loads(r.choices[0].message.content), SCHEMA)


@pytest.mark.parametrize("extra, message", [
    ({"structured_outputs": {"regex": "("}}, "structured_outputs.regex: invalid pattern"),
    ({"structured_outputs": {"regex": "a{40}"}},
     "regex: its shortest string takes 40 tokens; the canvas holds 24"),
    ({"structured_outputs": {"regex": "a", "choice": ["b"]}}, "structured_outputs: give one"),
    ({"response_format": {"type": "json_schema", "json_schema": {"name": "a"}}},
     "response_format.json_schema.schema: required"),
    ({"response_format": {"type": "json_schema", "json_schema": {
        "name": "a", "schema": {"not": {"type": "string"}}}}}, "json_schema: not supported"),
    ({"structured_outputs": {"grammar": "root ::= x"}}, "structured_outputs.grammar: "
                                                        "unrecognized"),
    ({"structured_outputs": {"choice": ["a"]}, "min_new_tokens": 2}, "min_new_tokens: not"),
])
def test_bad_input_is_a_400(text_server, extra, message):
    status, body, _ = post(text_server.port, "/v1/completions",
                        {"model": "text", "prompt": "hi", "max_tokens": 24, **extra})
    assert status == 400 and body["error"]["type"] == "invalid_request_error"
    assert body["error"]["message"].startswith(message), body
