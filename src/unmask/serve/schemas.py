"""Request bodies (validated with pydantic, strict types, bounded sizes) and OpenAI's response
shapes.

OpenAI's fields that unmask does not implement are accepted at their neutral value only
(``top_p`` 1, no penalties, no logprobs, ...) and refused otherwise, as an unknown field is:
a client never gets a silently different answer. unmask's own fields (``sampler``,
``preset``, ``block_length``, ``steps``, ``min_new_tokens``, ``confidence``) ride in the same
body (the ``openai`` client's ``extra_body``).
"""

from __future__ import annotations

import time
import uuid
from typing import Annotated, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, model_validator

from unmask.serve.jobs import Decoding

#: bounds of one request (the body size is bounded by the server's max_body_bytes too)
MAX_PROMPTS = 64
MAX_MESSAGES = 256
MAX_STOP = 4
MAX_STOP_CHARS = 64
MAX_TEMPERATURE = 100.0
Int = int  # (strict: no bool, no float, no numeric string)


def _neutral(*allowed):
    """A validator taking only ``allowed`` values, each of its own type (``0`` is not
    ``false``, ``true`` is not ``1``): OpenAI's fields the server accepts at their neutral
    value only."""

    def check(value):
        if not any(value is a or (type(value) is type(a) and value == a) for a in allowed):
            raise ValueError("only " + " or ".join(
                "null" if a is None else str(a).lower() for a in allowed) + " is supported")
        return value

    return BeforeValidator(check)


#: a list of prompts (templates)
Texts = Annotated[list[str], Field(min_length=1, max_length=MAX_PROMPTS)]


class Body(BaseModel):
    """A request body: unknown fields refused, no coercion, no NaN/inf."""

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)


class StreamOptions(Body):
    include_usage: bool = False


class UnmaskFields(Body):
    """unmask's decoding fields (:class:`~unmask.serve.jobs.Decoding`)."""

    sampler: str | None = Field(None, max_length=256)
    preset: str | None = Field(None, max_length=32)
    block_length: Int | None = Field(None, ge=1, le=1 << 20)
    steps: Int | None = Field(None, ge=1, le=1 << 20)
    temperature: float = Field(0.0, ge=0.0, le=MAX_TEMPERATURE)
    confidence: Literal["draw", "max"] = "draw"

    def decoding(self, min_new_tokens: int = 0) -> Decoding:
        return Decoding(self.sampler, self.preset, self.block_length, self.steps,
                        float(self.temperature), min_new_tokens, self.confidence)


class JSONSchemaFormat(Body):
    """OpenAI's ``response_format.json_schema``: the schema is enforced whether ``strict``
    is true or not (every answer matches it)."""

    name: str = Field(max_length=64)
    schema_: dict | None = Field(None, alias="schema")
    strict: bool | None = None
    description: str | None = Field(None, max_length=1024)


class ResponseFormat(Body):
    """OpenAI's ``response_format``."""

    type: Literal["text", "json_object", "json_schema"]
    json_schema: JSONSchemaFormat | None = None


class StructuredOutputs(Body):
    """vLLM's ``structured_outputs`` (extra body): one of ``regex``, ``choice``, ``json``
    (a schema, or its JSON text), ``json_object``."""

    regex: str | None = Field(None, max_length=4096)
    choice: list[str] | None = Field(None, min_length=1, max_length=256)
    json_: dict | str | None = Field(None, alias="json")
    json_object: bool | None = None


def output_constraint(fmt: ResponseFormat | None, so: StructuredOutputs | None):
    """The :class:`~unmask.constraints.ConstraintSpec` of a request's ``response_format``
    or ``structured_outputs`` (None: free text); UnmaskError naming the field."""
    from unmask import constraints
    from unmask.errors import UnmaskError, require

    wanted = [] if so is None else [k for k in ("regex", "choice", "json_", "json_object")
                                    if getattr(so, k) not in (None, False)]
    free = fmt is None or fmt.type == "text"
    require(free or so is None, "response_format: give response_format or "
                                "structured_outputs, not both")
    require(len(wanted) <= 1, "structured_outputs: give one of regex, choice, json, "
                              "json_object")
    where, build = None, None
    if not free:
        where = f"response_format.{fmt.type}"
        if fmt.type == "json_object":
            build = constraints.json_object
        else:
            schema = fmt.json_schema.schema_ if fmt.json_schema is not None else None
            require(schema is not None, "response_format.json_schema.schema: required")
            build = lambda: constraints.json_schema(schema)  # noqa: E731
    elif wanted:
        key = wanted[0]
        where = f"structured_outputs.{key.rstrip('_')}"
        value = getattr(so, key)
        build = {"regex": lambda: constraints.regex(value),
                 "choice": lambda: constraints.choice(list(value)),
                 "json_": lambda: constraints.json_schema(value),
                 "json_object": constraints.json_object}[key]
    if build is None:
        return None
    try:
        return build()
    except UnmaskError as exc:
        text = str(exc)
        raise UnmaskError(f"{where}: {text.split(': ', 1)[-1]}") from None


class OpenAIFields(UnmaskFields):
    """The fields completions and chat share (``response_format`` and vLLM's
    ``structured_outputs``: the language of the answer, docs/constraints.md)."""

    model: str = Field(max_length=256)
    max_tokens: Int | None = Field(None, ge=1, le=1 << 20)
    min_new_tokens: Int = Field(0, ge=0, le=1 << 20)
    n: Int = Field(1, ge=1, le=1024)
    seed: Int | None = Field(None, ge=0, le=2**62)
    stop: str | list[str] | None = None
    stream: bool = False
    stream_options: StreamOptions | None = None
    user: str | None = Field(None, max_length=256)
    # OpenAI's, accepted at their neutral value only (see the module docstring)
    top_p: float = Field(1.0, ge=1.0, le=1.0)
    presence_penalty: float = Field(0.0, ge=0.0, le=0.0)
    frequency_penalty: float = Field(0.0, ge=0.0, le=0.0)
    logit_bias: dict[str, float] | None = Field(None, max_length=0)
    logprobs: Annotated[bool | None, _neutral(False, None)] = None
    response_format: ResponseFormat | None = None
    structured_outputs: StructuredOutputs | None = None

    def decoding(self, min_new_tokens: int = 0) -> Decoding:
        d = super().decoding(min_new_tokens)
        d.constraint = output_constraint(self.response_format, self.structured_outputs)
        return d

    @model_validator(mode="after")
    def _stop_words(self):
        stop = [self.stop] if isinstance(self.stop, str) else (self.stop or [])
        if len(stop) > MAX_STOP or any(not 0 < len(s) <= MAX_STOP_CHARS for s in stop):
            raise ValueError(f"stop: at most {MAX_STOP} strings of 1 to {MAX_STOP_CHARS} "
                             "characters")
        return self

    @property
    def stops(self) -> list[str]:
        return [self.stop] if isinstance(self.stop, str) else list(self.stop or [])


class CompletionRequest(OpenAIFields):
    prompt: str | Texts
    echo: Annotated[bool, _neutral(False)] = False
    best_of: Annotated[int | None, _neutral(1, None)] = None
    suffix: Literal[None] = None

    @property
    def prompts(self) -> list[str]:
        return [self.prompt] if isinstance(self.prompt, str) else list(self.prompt)


class TextPart(Body):
    type: Literal["text"]
    text: str


class Message(Body):
    role: Literal["system", "developer", "user", "assistant"]
    content: str | Annotated[list[TextPart], Field(max_length=MAX_MESSAGES)]
    name: str | None = Field(None, max_length=64)

    def plain(self) -> dict:
        text = (self.content if isinstance(self.content, str)
                else "".join(p.text for p in self.content))
        return {"role": self.role, "content": text}


class ChatRequest(OpenAIFields):
    messages: list[Message] = Field(min_length=1, max_length=MAX_MESSAGES)
    max_completion_tokens: Int | None = Field(None, ge=1, le=1 << 20)

    @model_validator(mode="after")
    def _one_length(self):
        if self.max_tokens is not None and self.max_completion_tokens is not None:
            raise ValueError("give max_tokens or max_completion_tokens, not both")
        return self

    @property
    def gen_length(self) -> int | None:
        return self.max_tokens if self.max_tokens is not None else self.max_completion_tokens


class InfillRequest(UnmaskFields):
    model: str = Field(max_length=256)
    template: str | Texts
    seed: Int | None = Field(None, ge=0, le=2**62)

    @property
    def templates(self) -> list[str]:
        return [self.template] if isinstance(self.template, str) else list(self.template)


def first_error(error: ValidationError) -> str:
    """One line naming the first field at fault."""
    e = error.errors()[0]
    where = ".".join(str(p) for p in e.get("loc", ())) or "body"
    if e.get("type") == "extra_forbidden":
        return f"{where}: unrecognized request argument (not supported by this server)"
    return f"{where}: {e.get('msg', 'invalid value').removeprefix('Value error, ')}"


def error_body(message: str, kind: str = "invalid_request_error", param: str | None = None,
               code: str | None = None) -> dict:
    """OpenAI's error object."""
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


def new_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:24]}"


def now() -> int:
    return int(time.time())


def unmask_stats(gen, seed: int) -> dict:
    """unmask's per-choice numbers: forward passes, sequences evaluated, tokens per pass;
    for a constrained answer its constraint (kind, hash, cut passes)."""
    return {"passes": gen.nfe, "sequences": gen.sequences,
            "tokens_per_pass": round(gen.tokens_per_forward, 4),
            "cumulative_entropy": round(gen.cumulative_entropy, 4), "seed": seed,
            **({} if gen.constraint is None else {"constraint": gen.constraint})}


def usage(prompt_tokens: int, completion_tokens: int) -> dict:
    return {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens}
