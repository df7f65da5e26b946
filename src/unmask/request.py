"""One decoding request: everything a decode needs besides the model and its inputs.

A :class:`DecodeRequest` is built once by each entry point (the CLI's flags, a served
request's body, lm-eval's ``--model_args``, a Python caller) and read by everything
downstream: :func:`unmask.generate.generate`, :func:`unmask.infill.infill`, the server's
batcher and the benches. It validates in its constructor with the one-line errors the CLI
shows (:class:`~unmask.errors.UnmaskError` naming the field), parses its sampler spec once
(the canonical text is kept; LLaDA's remasking names map to ours), and round-trips through
JSON (:meth:`DecodeRequest.to_json`, :meth:`DecodeRequest.from_json`), so a bench file or a
served response records exactly what decoded it.

    >>> from unmask import DecodeRequest
    >>> r = DecodeRequest(sampler="low_confidence", gen_length=64, block_length=32)
    >>> r.sampler
    'confidence'
    >>> DecodeRequest.from_json(r.to_json()) == r
    True
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field

from unmask.errors import UnmaskError, require
from unmask.validation import (
    is_bool,
    is_int,
    json_type,
)

#: the remasking names of LLaDA / dLLM codebases -> our samplers
LLADA_NAMES = {"low_confidence": "confidence", "random": "uniform", "topk_margin": "margin",
               "entropy": "entropy", "maskgit_plus": "confidence"}
#: the largest seed: row r of a request decodes with seed + r, an int64
MAX_SEED = 2**62
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")


def sampler_spec(text: str):
    """The parsed :class:`~unmask.samplers.spec.SamplerSpec` of ``text``, LLaDA's names
    (``low_confidence``, ``random``, ``topk_margin``, ``maskgit_plus``) read as ours."""
    from unmask.samplers.spec import parse_spec

    require(isinstance(text, str) and text.strip(),
            f"sampler: expected a spec such as 'confidence' or 'eb:gamma=0.1', got {text!r}")
    return parse_spec(llada_named(text))


def llada_named(text: str) -> str:
    """Spec ``text``, stripped, with a LLaDA remasking name (``low_confidence``, ...) written
    as ours."""
    text = text.strip()
    name = _NAME.match(text)
    if name and name.group() in LLADA_NAMES:
        return LLADA_NAMES[name.group()] + text[name.end():]
    return text


@dataclass(frozen=True)
class DecodeRequest:
    """What a decode needs besides the model and its inputs (frozen, validated).

    sampler: a sampler spec (``"eb:gamma=0.1+verify=0.002"``; LLaDA's names accepted, or a
        parsed :class:`~unmask.samplers.spec.SamplerSpec`), kept in its canonical text, or a
        :class:`~unmask.samplers.base.Sampler` object (then the request has no JSON form).
    temperature: token temperature, a finite number >= 0 (0: argmax).
    confidence: ``"draw"`` or ``"max"`` (:class:`~unmask.decode.DecodeConfig`).
    seed: row i of the request decodes with seed ``seed + i``; in [0, 2**62].
    gen_length: generated positions after a prompt (generate; None: 128).
    block_length: semi-autoregressive block (None: one block; generate: must divide
        gen_length).
    steps: total steps over the generation, split evenly over its blocks (count samplers
        only; infill: steps per block that holds masks).
    min_new_tokens: the first this many generated positions cannot take an EOS id.
    stop_at_eos: a block of only EOS ends a row (the rest is EOS, one pass a block).
    chat_template: wrap each prompt as a user message of the tokenizer's chat template.
    batch_size: rows per decode call (None: all at once).
    pad_to_multiple_of: round a batch's prompt slots up to a multiple of this.
    cache_kv: None, ``"prefix"`` or ``"dual"`` (Fast-dLLM's block KV cache).
    batch_invariant: each row decodes as it would alone, bit for bit.
    compile: the model's forward under ``torch.compile``.
    constraint: a :class:`~unmask.constraints.ConstraintSpec` the output must match, or None.
    """

    sampler: object = "confidence"
    temperature: float = 0.0
    confidence: str = "draw"
    seed: int = 0
    gen_length: int | None = None
    block_length: int | None = None
    steps: int | None = None
    min_new_tokens: int = 0
    stop_at_eos: bool = True
    chat_template: bool = False
    batch_size: int | None = None
    pad_to_multiple_of: int | None = None
    cache_kv: str | None = None
    batch_invariant: bool = False
    compile: bool = False
    constraint: object = None
    #: the parsed sampler spec (None for a Sampler object); not a setting of its own
    spec: object = field(default=None, init=False, repr=False, compare=False)
    #: samplers built to check the request and not handed out yet, by block count
    _unused: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self):
        self._check_sampler()
        self.decode_config()  # temperature, confidence, cache_kv: the loop's own checks
        require(is_int(self.seed) and 0 <= self.seed <= MAX_SEED,
                f"seed: must be an integer in [0, 2**62], got {self.seed!r}")
        for name in ("gen_length", "block_length", "steps", "batch_size",
                     "pad_to_multiple_of"):
            _optional_count(name, getattr(self, name))
        gen_length = self.gen_length or 128
        if self.block_length is not None and self.gen_length is not None:
            require(gen_length % self.block_length == 0,
                    f"block_length: {self.block_length} does not divide gen_length "
                    f"{gen_length}")
        require(is_int(self.min_new_tokens) and 0 <= self.min_new_tokens <= gen_length,
                f"min_new_tokens: must be an integer in [0, gen_length {gen_length}], got "
                f"{self.min_new_tokens!r}")
        for name in ("stop_at_eos", "chat_template", "batch_invariant", "compile"):
            require(is_bool(getattr(self, name)),
                    f"{name}: must be True or False, got {getattr(self, name)!r}")
        require(self.constraint is None or callable(getattr(self.constraint, "to_json", None)),
                "constraint: expected a constraint (unmask.constraints.regex(...), "
                f"json_schema(...), choice(...)) or None, got {type(self.constraint).__name__}")
        if self.steps is not None:  # a count sampler, steps split evenly over the blocks
            n_blocks = (1 if self.gen_length is None
                        else self.gen_length // (self.block_length or self.gen_length))
            self._unused[n_blocks] = self.build_sampler(n_blocks)

    def _check_sampler(self) -> None:
        from unmask.samplers.base import Sampler
        from unmask.samplers.spec import SamplerSpec

        if isinstance(self.sampler, Sampler):
            return
        spec = (self.sampler if isinstance(self.sampler, SamplerSpec)
                else sampler_spec(self.sampler))
        object.__setattr__(self, "spec", spec)
        object.__setattr__(self, "sampler", spec.text)

    # ------------------------------------------------------------------ reading it

    @property
    def corrected(self) -> bool:
        """Whether the spec asks for the corrector's hooks (``+corrector``)."""
        return self.spec is not None and self.spec.corrected

    def build_sampler(self, n_blocks: int = 1):
        """A fresh sampler of the request, its ``steps`` split over ``n_blocks`` blocks (the
        first one asked for is the one built to check the request, never used)."""
        kept = self._unused.pop(n_blocks, None)
        if kept is not None:
            return kept
        sampler = self.spec.build() if self.spec is not None else self.sampler
        return with_steps(sampler, self.steps, n_blocks)

    def decode_config(self, block_size: int | None = None):
        """The loop's :class:`~unmask.decode.DecodeConfig` for blocks of ``block_size``."""
        from unmask.decode import DecodeConfig

        return DecodeConfig(temperature=self.temperature, block_size=block_size,
                            confidence=self.confidence, cache_kv=self.cache_kv,
                            batch_invariant=self.batch_invariant)

    def replace(self, **changes) -> DecodeRequest:
        """A copy with ``changes`` (validated anew)."""
        unknown = sorted(set(changes) - set(SETTINGS))
        require(not unknown, f"{unknown[0] if unknown else ''}: not a decoding setting; "
                             f"expected one of {', '.join(SETTINGS)}")
        if "sampler" not in changes and self.spec is not None:
            changes["sampler"] = self.spec  # parsed once: a copy does not parse it again
        return dataclasses.replace(self, **changes)

    # ------------------------------------------------------------------ JSON

    def to_json(self) -> dict:
        """The request as plain JSON values (``from_json`` gives it back); refused for a
        request holding a Sampler object."""
        require(self.spec is not None, "sampler: a Sampler object has no JSON form; give its "
                                       "spec text")
        out = {name: getattr(self, name) for name in SETTINGS}
        out["constraint"] = None if self.constraint is None else self.constraint.to_json()
        return out

    @classmethod
    def from_json(cls, data: dict) -> DecodeRequest:
        """The request of ``data`` (keys of :data:`SETTINGS`, any left out at its default);
        an unknown key or a value of the wrong JSON type is refused in one line."""
        require(isinstance(data, dict), f"request: expected a JSON object, got "
                                        f"{json_type(data)}")
        unknown = sorted(map(repr, set(data) - set(SETTINGS)))
        require(not unknown, f"request: unknown setting {unknown[0] if unknown else ''}; "
                             f"expected {', '.join(SETTINGS)}")
        values = dict(data)
        if values.get("constraint") is not None:
            from unmask.constraints import ConstraintSpec

            values["constraint"] = ConstraintSpec.from_json(values["constraint"])
        require(isinstance(values.get("sampler", ""), str),
                f"sampler: expected a spec string, got {json_type(values.get('sampler'))}")
        return cls(**values)

    @classmethod
    def from_settings(cls, request: DecodeRequest | None = None, **settings) -> DecodeRequest:
        """``request``, or one built from keyword ``settings`` (not both): how
        :func:`~unmask.generate.generate` and :func:`~unmask.infill.infill` take either."""
        if request is None:
            unknown = sorted(set(settings) - set(SETTINGS))
            if unknown:
                raise UnmaskError(f"{unknown[0]}: not a decoding setting; expected one of "
                                  f"{', '.join(SETTINGS)}")
            return cls(**settings)
        require(isinstance(request, DecodeRequest),
                f"request: expected a DecodeRequest, got {type(request).__name__}")
        require(not settings, f"request: give a DecodeRequest or settings "
                              f"({', '.join(sorted(settings))}), not both")
        return request


#: the settings of a request, in order (its JSON keys)
SETTINGS = tuple(f.name for f in dataclasses.fields(DecodeRequest) if f.init)


def with_steps(sampler, steps: int | None, n_blocks: int):
    """``sampler`` with ``steps`` (a total) split evenly over ``n_blocks`` blocks (None:
    ``sampler`` as it is); only samplers that reveal a count per step take steps."""
    from unmask.samplers.base import CountRule

    if steps is None:
        return sampler
    require(is_int(steps) and steps >= 1, f"steps: must be an integer >= 1, got {steps!r}")
    require(steps % n_blocks == 0, f"steps: {steps} is not a multiple of the {n_blocks} "
                                   "blocks (steps are split evenly over blocks)")
    require(isinstance(sampler, CountRule),
            f"steps: sampler {sampler.name!r} chooses how many positions to reveal itself; "
            "drop steps")
    return dataclasses.replace(sampler, steps=steps // n_blocks)


def _optional_count(name: str, value) -> None:
    what = "None or an integer" if name == "pad_to_multiple_of" else "an integer"
    require(value is None or (is_int(value) and value >= 1),
            f"{name}: must be {what} >= 1, got {value!r}")
