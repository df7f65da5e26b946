"""What a constrained decode must produce: a small frozen, serialisable description.

A :class:`ConstraintSpec` names a language (a regular expression, a JSON Schema, any JSON
object, or one of a list of strings) and nothing about a tokenizer or a model: it is what a
request carries (``DecodeRequest.constraint``), what a response and a bench record report
(``kind`` and ``hash``), and the key the compiled form is cached by, together with the
tokenizer. This module imports neither torch nor outlines-core.
"""

from __future__ import annotations

import hashlib
import json
import re
import warnings
from dataclasses import dataclass
from typing import Any

from unmask.errors import UnmaskError, require
from unmask.io import parse_json
from unmask.validation import is_int

#: the kinds of language a :class:`ConstraintSpec` names
KINDS = ("regex", "json_schema", "json_object", "choice")

#: nesting depth of ``json_object()`` when none is given (objects and arrays inside it)
DEFAULT_JSON_DEPTH = 2
MAX_JSON_DEPTH = 3


@dataclass(frozen=True)
class ConstraintSpec:
    """A language the decoded text must belong to.

    kind: one of :data:`KINDS`.
    value: the pattern (``regex``); the schema as canonical JSON text, keys sorted
        (``json_schema``); the nesting depth bound, an int (``json_object``); the tuple of
        alternatives (``choice``).

    Build one with :func:`regex`, :func:`json_schema`, :func:`json_object` or :func:`choice`
    (they validate; constructing the class directly validates the same way).
    """

    kind: str
    value: Any

    def __post_init__(self):
        require(self.kind in KINDS,
                f"constraint: kind must be one of {', '.join(KINDS)}, got {self.kind!r}")
        check = {"regex": _check_regex, "json_schema": _check_schema_text,
                 "json_object": _check_depth, "choice": _check_choices}[self.kind]
        object.__setattr__(self, "value", check(self.value))

    @property
    def schema(self) -> dict | None:
        """The JSON Schema as a dict (``json_schema``), else None."""
        return json.loads(self.value) if self.kind == "json_schema" else None

    def to_json(self) -> dict:
        """A JSON-ready dict, ``{"kind": ..., "value": ...}`` (a schema as a dict)."""
        value = (self.schema if self.kind == "json_schema"
                 else list(self.value) if self.kind == "choice" else self.value)
        return {"kind": self.kind, "value": value}

    @classmethod
    def from_json(cls, data: dict) -> ConstraintSpec:
        """The spec :meth:`to_json` wrote (validated again)."""
        require(isinstance(data, dict) and set(data) == {"kind", "value"},
                f"constraint: expected an object with 'kind' and 'value', got {data!r:.80}")
        return cls(data["kind"], data["value"])

    @property
    def hash(self) -> str:
        """A stable 16-hex-digit digest of the language (kind and value), the same in every
        process and version of Python."""
        text = json.dumps(self.to_json(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def record(self) -> dict:
        """What a response or a bench record reports: ``{"kind": ..., "hash": ...}``."""
        return {"kind": self.kind, "hash": self.hash}


def regex(pattern: str) -> ConstraintSpec:
    """The decoded text must match ``pattern`` entirely (``re.fullmatch``)."""
    return ConstraintSpec("regex", pattern)


def json_schema(schema: dict | str) -> ConstraintSpec:
    """The decoded text must be JSON valid against ``schema`` (a dict or JSON text)."""
    return ConstraintSpec("json_schema", schema)


def json_object(max_depth: int = DEFAULT_JSON_DEPTH) -> ConstraintSpec:
    """The decoded text must be a JSON object whose values nest at most ``max_depth`` levels
    of objects and arrays (OpenAI's ``response_format={"type": "json_object"}``)."""
    return ConstraintSpec("json_object", max_depth)


def choice(*options: str) -> ConstraintSpec:
    """The decoded text must be exactly one of ``options`` (strings, or one list of them)."""
    if len(options) == 1 and isinstance(options[0], (list, tuple)):
        options = tuple(options[0])
    return ConstraintSpec("choice", options)


def _check_regex(pattern) -> str:
    require(isinstance(pattern, str) and pattern != "",
            f"regex: expected a non-empty pattern string, got {pattern!r:.80}")
    try:
        with warnings.catch_warnings():
            # a nested set or a set operation in a class ("[[:digit:]]", "[a-z&&[^aeiou]]")
            # is a literal here and an operation in the compiler's syntax: refused
            warnings.simplefilter("error", FutureWarning)
            re.compile(pattern)
    except FutureWarning as exc:
        raise UnmaskError(f"regex: {pattern!r:.80}: {exc}: the compiler reads it as a set "
                          "operation; escape the '[' or the doubled sign") from None
    except (re.error, OverflowError, RecursionError) as exc:
        raise UnmaskError(f"regex: invalid pattern {pattern!r:.80}: "
                          f"{str(exc) or type(exc).__name__}") from None
    return pattern


def _check_schema_text(schema) -> str:
    try:
        return _schema_text(schema)
    except UnmaskError:
        raise
    except (RecursionError, TypeError, ValueError, AttributeError) as exc:
        # a schema holding itself, keys that are not strings, NaN, a value JSON has no form
        # for, a malformed "$schema"
        why = str(exc)[:120] or type(exc).__name__
        raise UnmaskError(f"json_schema: not a JSON Schema: {why}") from None


def _schema_text(schema) -> str:
    if isinstance(schema, str):
        try:
            schema = parse_json(schema)
        except json.JSONDecodeError as exc:
            raise UnmaskError(f"json_schema: not JSON: {exc}") from None
    require(isinstance(schema, dict),
            f"json_schema: expected a JSON object (a dict), got {type(schema).__name__}")
    try:
        import jsonschema
    except ImportError:  # outlines-core reads the schema again when it is compiled
        jsonschema = None
    if jsonschema is not None:
        try:
            jsonschema.validators.validator_for(schema).check_schema(schema)
        except jsonschema.SchemaError as exc:
            where = "/".join(str(p) for p in exc.path) or "(top)"
            raise UnmaskError(f"json_schema: invalid schema at {where}: "
                              f"{exc.message:.120}") from None
    # canonical JSON (no NaN: not JSON) before anything walks it: a dict holding itself or a
    # non-string key is refused here
    text = json.dumps(schema, sort_keys=True, separators=(",", ":"), allow_nan=False)
    _check_enforced(schema, "")
    return text


#: validation keywords the schema's compiled language does not hold to (outlines-core's
#: schema-to-regex leaves them out): a schema using one is refused, since its answers could
#: break it (``uniqueItems: false`` says nothing and is let through)
UNENFORCED = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf",
              "uniqueItems", "contains", "minContains", "maxContains", "maxProperties",
              "propertyNames", "dependentRequired", "dependentSchemas", "dependencies",
              "if", "then", "else", "unevaluatedItems", "unevaluatedProperties")
#: the length keywords, and the most they may ask (larger ones the compiler misreads)
_LENGTHS = ("minLength", "maxLength", "minItems", "maxItems", "minProperties")
MAX_LENGTH = 2**31 - 1
#: where a schema holds subschemas: one, a list of them, or a map of names to them
#: (``items`` is one subschema, or a list of them in drafts before 2020-12)
_ONE = ("items", "additionalProperties", "additionalItems", "not")
_LIST = ("anyOf", "oneOf", "allOf", "prefixItems", "items")
_MAP = ("properties", "patternProperties", "$defs", "definitions")


def _check_enforced(schema, where: str) -> None:
    """Refuse a keyword of :data:`UNENFORCED` anywhere in ``schema`` (walked through its
    subschemas, so a property *named* like a keyword is not one)."""
    if not isinstance(schema, dict):
        return
    for key in UNENFORCED:
        if key in schema and not (key == "uniqueItems" and schema[key] is False):
            raise UnmaskError(f"json_schema: {key!r} at {where or '/'} is not enforced by "
                              "the compiled language (its answers could break it); drop it")
    for key in _LENGTHS:
        value = schema.get(key)
        require(value is None or (isinstance(value, (int, float)) and value <= MAX_LENGTH),
                f"json_schema: {key!r} at {where or '/'} must be at most {MAX_LENGTH}, got "
                f"{value!r:.40}")
    for key in _ONE:
        _check_enforced(schema.get(key), f"{where}/{key}")
    for key in _LIST:
        if isinstance(schema.get(key), list):
            for i, sub in enumerate(schema[key]):
                _check_enforced(sub, f"{where}/{key}/{i}")
    for key in _MAP:
        if isinstance(schema.get(key), dict):
            for name, sub in schema[key].items():
                _check_enforced(sub, f"{where}/{key}/{name}")


def _check_depth(depth) -> int:
    require(is_int(depth) and 1 <= depth <= MAX_JSON_DEPTH,
            f"json_object: max_depth must be an integer in [1, {MAX_JSON_DEPTH}], "
            f"got {depth!r}")
    return int(depth)


def _check_choices(options) -> tuple[str, ...]:
    require(isinstance(options, (list, tuple)) and len(options) >= 1,
            f"choice: expected at least one option, got {options!r:.80}")
    for option in options:
        require(isinstance(option, str) and option != "",
                f"choice: options must be non-empty strings, got {option!r:.80}")
    return tuple(options)
