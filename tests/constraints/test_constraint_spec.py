"""ConstraintSpec: validation, serialisation and a stable hash."""

import json
import subprocess
import sys

import pytest

from unmask import constraints
from unmask.constraints import ConstraintSpec
from unmask.errors import UnmaskError


def test_round_trip_and_hash_are_stable():
    specs = [constraints.regex(r"[0-9]{2,3}"),
             constraints.json_schema({"type": "object", "properties": {"a": {"type": "integer"}}}),
             constraints.json_object(3), constraints.choice("yes", "no")]
    for spec in specs:
        data = json.loads(json.dumps(spec.to_json()))
        back = ConstraintSpec.from_json(data)
        assert back == spec and back.hash == spec.hash and hash(back) == hash(spec)
        assert len(spec.hash) == 16
    assert len({s.hash for s in specs}) == 4
    # key order of a schema does not change the language nor the hash
    a = constraints.json_schema('{"type": "string", "maxLength": 3}')
    b = constraints.json_schema({"maxLength": 3, "type": "string"})
    assert a == b and a.hash == b.hash and a.schema == {"type": "string", "maxLength": 3}
    assert constraints.choice(["a", "b"]) == constraints.choice("a", "b")
    # the digest is a function of the content alone (fixed here so it never drifts)
    text = '{"kind":"regex","value":"[0-9]+"}'
    import hashlib
    assert constraints.regex("[0-9]+").hash == hashlib.sha256(text.encode()).hexdigest()[:16]


@pytest.mark.parametrize("build, message", [
    (lambda: constraints.regex("("), "regex: invalid pattern"),
    (lambda: constraints.regex(""), "regex: expected a non-empty pattern"),
    (lambda: constraints.regex(3), "regex: expected a non-empty pattern"),
    (lambda: constraints.json_schema("{not json"), "json_schema: not JSON"),
    (lambda: constraints.json_schema([1]), "json_schema: expected a JSON object"),
    (lambda: constraints.json_schema({"type": 3}), "json_schema: invalid schema"),
    (lambda: constraints.json_object(0), "json_object: max_depth"),
    (lambda: constraints.choice(), "choice: expected at least one option"),
    (lambda: constraints.choice("a", ""), "choice: options must be non-empty"),
    (lambda: ConstraintSpec("grammar", "x"), "constraint: kind must be one of"),
    (lambda: ConstraintSpec.from_json({"kind": "regex"}), "constraint: expected an object"),
    (lambda: constraints.regex("a{4294967296}"), "regex: invalid pattern"),
    # a literal '[' or '&&' to Python, a nested set or an intersection to the compiler
    (lambda: constraints.regex("[[:digit:]]"), "regex: '[[:digit:]]': Possible nested set"),
    (lambda: constraints.regex("[a-z&&[^aeiou]]x"), "regex: '[a-z&&[^aeiou]]x': Possible set"),
    (lambda: constraints.json_schema("[" * 200_000), "json_schema: not JSON: nested too deep"),
    (lambda: constraints.json_schema({"$schema": 5}), "json_schema: not a JSON Schema"),
    (lambda: constraints.json_schema({1: {}, "a": {}}), "json_schema: not a JSON Schema"),
    (lambda: constraints.json_schema({"enum": [float("nan")]}), "json_schema: not a JSON Sch"),
    (lambda: constraints.json_schema(_holding_itself()), "json_schema: not a JSON Schema"),
])
def test_bad_input_is_one_line(build, message):
    with pytest.raises(UnmaskError) as err:
        build()
    assert str(err.value).startswith(message) and "\n" not in str(err.value)


def _holding_itself() -> dict:
    schema: dict = {"type": "object"}
    schema["properties"] = {"me": schema}
    return schema


def test_frozen():
    spec = constraints.regex("a")
    with pytest.raises(AttributeError):
        spec.value = "b"


def test_import_is_light():
    code = ("import sys, unmask.constraints; "
            "print(any(m in sys.modules for m in ('torch', 'outlines_core')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "False"


#: a schema using each keyword the compiled language leaves out, and the schema without it
UNHELD = {
    "minimum": ({"type": "integer", "minimum": 5}, {"type": "integer"}),
    "maximum": ({"type": "number", "maximum": 0.6}, {"type": "number"}),
    "exclusiveMinimum": ({"type": "integer", "exclusiveMinimum": 0}, {"type": "integer"}),
    "multipleOf": ({"type": "integer", "multipleOf": 7}, {"type": "integer"}),
    "uniqueItems": ({"type": "array", "items": {"type": "integer"}, "uniqueItems": True},
                    {"type": "array", "items": {"type": "integer"}}),
    "maxProperties": ({"type": "object", "properties": {"a": {"type": "integer"}},
                       "maxProperties": 0},
                      {"type": "object", "properties": {"a": {"type": "integer"}}}),
}


@pytest.mark.parametrize("keyword", list(UNHELD))
def test_a_keyword_the_compiled_language_leaves_out_is_refused(keyword):
    """outlines-core's regex of the schema is the same with and without the keyword (so an
    answer could break it): the schema is refused, naming it and where it is, also nested."""
    from outlines_core.json_schema import build_regex_from_schema

    schema, without = UNHELD[keyword]
    assert build_regex_from_schema(json.dumps(schema)) == build_regex_from_schema(
        json.dumps(without))  # if this fails, outlines-core holds it now: let it through
    with pytest.raises(UnmaskError, match=f"'{keyword}' at / is not enforced"):
        constraints.json_schema(schema)
    nested = {"type": "object", "properties": {"x": schema}, "required": ["x"]}
    with pytest.raises(UnmaskError, match=f"'{keyword}' at /properties/x is not enforced"):
        constraints.json_schema(nested)


def test_keywords_it_holds_and_property_names_like_keywords_pass():
    constraints.json_schema({"type": "object", "required": ["minimum"], "properties": {
        "minimum": {"type": "string", "minLength": 1, "maxLength": 3},
        "tags": {"type": "array", "items": {"enum": ["a", "b"]}, "maxItems": 2,
                 "uniqueItems": False}}})
    with pytest.raises(UnmaskError, match="'minLength' at / must be at most"):
        constraints.json_schema({"type": "string", "minLength": 1e308})
