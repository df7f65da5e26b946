"""A request's rows as a :class:`Job`, checked against the served model before it is queued.

Each prompt of a completion request (each template of an infill request) is one job of ``n``
rows (one for a template); choice ``i`` of the request decodes with seed ``seed + i``, so
prompt ``p``, choice ``j`` of a request is ``generate(prompt_p, seed=seed + p * n + j,
pad_to_multiple_of=M)`` alone, M the server's ``pad_to_multiple_of`` (default: the block).
Jobs with equal :class:`Settings` may share a decode call: the settings include the row width
(the prompt slots rounded up to a multiple of M), so that every row of a call sits where it
would sit alone and prompts of other lengths share calls.
"""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass
from pathlib import Path

from unmask.decode import DecodeConfig
from unmask.errors import UnmaskError, require
from unmask.generate import (
    check_lengths,
    check_prompts,
    encode_prompt,
    parse_sampler,
    prompt_batch,
    text_constraint,
)
from unmask.infill import plan_infill
from unmask.models.auto import load_model
from unmask.models.base import MaskedModel
from unmask.presets import model_preset_spec
from unmask.request import LLADA_NAMES, with_steps
from unmask.samplers.mi_guided import NoEstimator
from unmask.samplers.requests import check_request_spec
from unmask.samplers.spec import parse_spec
from unmask.serve.options import ServeOptions
from unmask.validation import is_int, text_problem

#: the largest seed a request may give (row i decodes with seed + i)
MAX_SEED = 2**62
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")


@dataclass(frozen=True)
class Settings:
    """Everything that must be equal for rows to decode in one call.

    kind: ``"generate"`` (continue a prompt) or ``"infill"`` (fill a template's masks).
    sampler: the sampler spec, canonical (:attr:`~unmask.samplers.spec.SamplerSpec.text`).
    gen_length: generated positions (0 for infill); block_length: the semi-autoregressive
    block (None: infill's default); steps, temperature, min_new_tokens, confidence: as
    :func:`unmask.generate.generate`; width: the row's length alone (prompt slots and
    generated positions).
    """

    kind: str
    sampler: str
    gen_length: int
    block_length: int | None
    steps: int | None
    temperature: float
    min_new_tokens: int
    confidence: str
    width: int


@dataclass(eq=False)
class Job:
    """Rows of one request that decode together: ``rows`` their token ids, ``texts`` the
    prompt (template) of each, ``seeds`` their seeds; ``stream``: report committed blocks;
    ``cancelled``: set when the client has gone (its rows leave the decode)."""

    settings: Settings
    rows: list[list[int]]
    texts: list[str]
    seeds: list[int]
    stream: bool = False
    cancelled: bool = False
    #: the language its rows' texts must belong to (a ConstraintSpec; None: free). Not a
    #: setting: rows with other constraints, or none, share a call (each row its own)
    constraint: object = None


@dataclass
class Decoding:
    """A request's unmask fields (any may be None: the server's default)."""

    sampler: str | None = None
    preset: str | None = None
    block_length: int | None = None
    steps: int | None = None
    temperature: float = 0.0
    min_new_tokens: int = 0
    confidence: str = "draw"
    #: ``response_format`` / ``structured_outputs`` as a ConstraintSpec (None: free text)
    constraint: object = None


class ServedModel:
    """The model a server serves, loaded once, and how requests become :class:`Job` s."""

    def __init__(self, model: MaskedModel, options: ServeOptions):
        self.model, self.options = model, options
        self.tokenizer = getattr(model, "tokenizer", None)
        if options.chat_template and self.tokenizer is not None:
            self.tokenizer.chat_template = options.chat_template
        self.name = options.served_name or Path(str(options.model)).name or str(options.model)
        self.max_tokens = min(options.max_tokens or model.max_length, model.max_length)
        self.default_gen_length = min(getattr(model, "default_gen_length", None) or 128,
                                      self.max_tokens)
        self.default_sampler = operator_sampler(options.sampler)
        self._check_start()

    def _check_start(self) -> None:
        """Refuse at start-up, naming the flag, what would fail every request: a
        ``--cache-kv`` the model cannot use, a default sampler that cannot prepare on this
        model (no estimator for it, a bad recommended setting beside its estimator)."""
        from unmask.kv_cache import check_cacheable

        for flag, check in (
                ("--cache-kv", lambda: self.options.cache_kv is None
                 or check_cacheable(self.model, self.options.cache_kv)),
                ("--sampler", lambda: parse_sampler(self.default_sampler).prepare(self.model))):
            try:
                check()
            except UnmaskError as e:
                text = str(e).removeprefix(flag.strip("-").replace("-", "_") + ": ")
                raise UnmaskError(f"{flag}: {text}") from None

    @classmethod
    def load(cls, options: ServeOptions) -> ServedModel:
        """Load ``options.model`` (its flags: device, dtype, remote code)."""
        kwargs: dict = {"device": options.device}
        if options.trust_remote_code:
            kwargs["trust_remote_code"] = True
        if options.dtype:
            kwargs["dtype"] = options.dtype
        return cls(load_model(options.model, **kwargs), options)

    @property
    def text(self) -> bool:
        """Whether the model reads text (has a tokenizer): completions and chat."""
        return self.tokenizer is not None

    def sampler(self, d: Decoding) -> str:
        """The canonical spec a request decodes with."""
        require(d.sampler is None or d.preset is None, "sampler: give sampler or preset, "
                                                       "not both")
        if d.preset is not None:  # the served model's own preset where it has one
            return operator_sampler(model_preset_spec(d.preset, self.options.model))
        if d.sampler is None:
            return self.default_sampler
        spec = request_sampler(d.sampler)
        try:  # what it loads for this model (an estimator) is the server's own
            parse_sampler(spec).prepare(self.model)
        except NoEstimator:
            raise UnmaskError("sampler: this server has no MI estimator for its model (a "
                              "request cannot name one; its operator may serve one with "
                              "--sampler 'mi-guided:estimator=FOLDER')") from None
        return spec

    def encode(self, prompt: str | None = None, messages: list[dict] | None = None,
               where: str = "prompt") -> list[int]:
        """The token ids of a completion ``prompt`` or of chat ``messages`` (the chat
        template, with the generation prompt); text that is not text (a lone surrogate, a
        NUL) is refused naming ``where`` (or the message) and the position."""
        require(self.text, "model: it reads no text (no tokenizer); use /v1/infill")
        if messages is None:
            problem = text_problem(prompt)
            require(problem is None, f"{where}: holds {problem}")
            return encode_prompt(self.tokenizer, prompt)
        for i, m in enumerate(messages):
            problem = text_problem(str(m.get("content", "")))
            require(problem is None, f"messages[{i}].content: holds {problem}")
        require(getattr(self.tokenizer, "chat_template", None),
                "messages: the model's tokenizer has no chat template (start the server with "
                "--chat-template FILE)")
        try:
            out = self.tokenizer.apply_chat_template(messages, add_generation_prompt=True,
                                                     tokenize=True)
        except Exception as e:  # noqa: BLE001 - a template may raise anything on odd input
            raise UnmaskError(f"messages: the chat template refused them: "
                              f"{' '.join(str(e).split())[:200]}") from None
        ids = out["input_ids"] if isinstance(out, dict) or hasattr(out, "keys") else out
        return [int(i) for i in ids]

    def generate_jobs(self, prompts: list[tuple[str, list[int]]], *, n: int,
                      gen_length: int | None, seed: int | None, d: Decoding,
                      stream: bool = False, chat: bool = False) -> list[Job]:
        """One job per prompt (text, ids) of ``n`` rows; :class:`UnmaskError` naming the
        field at fault."""
        gen_length = self.default_gen_length if gen_length is None else gen_length
        require(is_int(gen_length) and 1 <= gen_length <= self.max_tokens,
                f"max_tokens: must be an integer in [1, {self.max_tokens}], got {gen_length!r}")
        require(is_int(n) and 1 <= n and n * len(prompts) <= self.options.max_n,
                f"n: {n} choices for {len(prompts)} prompt(s) exceed the server's limit of "
                f"{self.options.max_n} rows per request")
        seed = check_seed(seed)
        spec = self.sampler(d)
        block = check_lengths([p for p, _ in prompts], gen_length, d.block_length, None,
                               d.min_new_tokens)
        with_steps(parse_sampler(spec), d.steps, gen_length // block)
        DecodeConfig(temperature=d.temperature, block_size=block, confidence=d.confidence,
                     cache_kv=self.options.cache_kv)
        try:
            check_prompts(self.model, self.tokenizer, [ids for _, ids in prompts], gen_length)
        except UnmaskError as e:  # a chat's one prompt is its messages, templated
            raise UnmaskError(str(e).replace("prompt 0:", "messages (templated):", 1)
                              if chat else str(e)) from None
        require(d.constraint is None or d.min_new_tokens == 0,
                "min_new_tokens: not with response_format or structured_outputs (the "
                "language decides where a text ends)")
        jobs = []
        for p, (text, ids) in enumerate(prompts):
            x, ends = prompt_batch(self.model, [ids], block, gen_length,
                                   min_new_tokens=d.min_new_tokens,
                                   pad_to_multiple_of=self.prompt_multiple(block))
            if d.constraint is not None:  # compiled and checked now: refused before a pass
                text_constraint(self.model, x, ends, d.constraint)
            settings = Settings("generate", spec, gen_length, block, d.steps,
                                float(d.temperature), d.min_new_tokens, d.confidence,
                                x.shape[1])
            jobs.append(Job(settings, [ids] * n, [text] * n,
                            [seed + p * n + j for j in range(n)], stream,
                            constraint=d.constraint))
        return jobs

    def prompt_multiple(self, block: int) -> int:
        """What a completion row's prompt slots are rounded up to a multiple of."""
        return self.options.pad_to_multiple_of or block

    def infill_jobs(self, templates: list[str], *, seed: int | None, d: Decoding) -> list[Job]:
        """One job per template (seed ``seed + i``); :class:`UnmaskError` naming the field at
        fault."""
        require(0 < len(templates) <= self.options.max_n,
                f"template: give 1 to {self.options.max_n} templates, got {len(templates)}")
        seed = check_seed(seed)
        spec = self.sampler(d)
        with_steps(parse_sampler(spec), d.steps, 1)
        DecodeConfig(temperature=d.temperature, block_size=d.block_length,
                     confidence=d.confidence)
        jobs = []
        for i, template in enumerate(templates):
            plan = plan_infill(self.model, [template], block_length=d.block_length)
            x, _ = plan.batch(plan.encoded)
            settings = Settings("infill", spec, 0, d.block_length, d.steps,
                                float(d.temperature), 0, d.confidence, x.shape[1])
            jobs.append(Job(settings, plan.encoded, [template], [seed + i]))
        return jobs


def check_seed(seed: int | None) -> int:
    """``seed``, or a fresh random one for None; refuses one outside [0, 2**62]."""
    if seed is None:
        return secrets.randbelow(2**31)
    require(is_int(seed) and 0 <= seed <= MAX_SEED,
            f"seed: must be an integer in [0, 2**62], got {seed!r}")
    return int(seed)


def _llada_named(text: str) -> str:
    """``text`` with a LLaDA remasking name (``low_confidence``, ...) written as ours."""
    name = _NAME.match(text)
    if name and name.group() in LLADA_NAMES:
        return LLADA_NAMES[name.group()] + text[name.end():]
    return text


def operator_sampler(text: str) -> str:
    """The canonical spec of the server's own sampler (any spec ``unmask generate`` takes)."""
    parse_sampler(text)
    return parse_spec(_llada_named(text.strip())).text


def request_sampler(text: str) -> str:
    """The canonical spec of a request's ``sampler``: as :func:`operator_sampler`, once
    :func:`~unmask.samplers.requests.check_request_spec` has found nothing a request may not
    ask (a parameter that may name a file, a word that is not plain, a cost out of bounds),
    before anything is built."""
    require(isinstance(text, str) and 0 < len(text.strip()) <= 256,
            "sampler: expected a spec such as 'confidence' or 'eb:gamma=0.1' (at most 256 "
            "characters)")
    check_request_spec(_llada_named(text.strip()))
    return operator_sampler(text)
