"""A request's rows as a :class:`Job`, checked against the served model before it is queued.

Each prompt of a completion request (each template of an infill request) is one job of ``n``
rows (one for a template); choice ``i`` of the request decodes with seed ``seed + i``, so
prompt ``p``, choice ``j`` of a request is ``generate(prompt_p, seed=seed + p * n + j,
pad_to_multiple_of=M)`` alone, M the server's ``pad_to_multiple_of`` (default: the block).
Each request is read into one :class:`~unmask.request.DecodeRequest`, built once; jobs with
equal :class:`Settings` (that request, its seed and constraint aside) may share a decode call:
the settings include the row width
(the prompt slots rounded up to a multiple of M), so that every row of a call sits where it
would sit alone and prompts of other lengths share calls.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from pathlib import Path

from unmask.errors import UnmaskError, require
from unmask.generate import (
    PromptLayout,
    check_prompt_texts,
    check_prompts,
    encode_prompt,
    prompt_batch,
    text_constraint,
    text_request,
)
from unmask.infill import InfillPlan, plan_infill
from unmask.models.auto import load_model
from unmask.models.base import MaskedModel
from unmask.presets import model_preset_spec
from unmask.request import DecodeRequest, llada_named
from unmask.samplers.mi_guided import NoEstimator
from unmask.samplers.requests import check_request_spec
from unmask.serve.options import ServeOptions
from unmask.validation import is_int, text_problem

#: the largest seed a request may give (row i decodes with seed + i)
MAX_SEED = 2**62


class Completion:
    """Rows that continue prompts: :func:`unmask.generate.generate`'s layout."""

    @staticmethod
    def layout(served: ServedModel, request: DecodeRequest, rows: list[list[int]],
               texts: list[str]) -> tuple[PromptLayout, int]:
        """The rows' :class:`~unmask.generate.Layout` and its number of blocks."""
        block = request.block_length or request.gen_length
        return PromptLayout(served.model, served.tokenizer, texts, rows, block,
                            request.gen_length, min_new_tokens=request.min_new_tokens,
                            pad_to_multiple_of=request.pad_to_multiple_of
                            ), request.gen_length // block


class Templates:
    """Templates whose masks are filled: :func:`unmask.infill.infill`'s layout."""

    @staticmethod
    def layout(served: ServedModel, request: DecodeRequest, rows: list[list[int]],
               texts: list[str]) -> tuple[InfillPlan, int]:
        return plan_infill(served.model, texts, block_length=request.block_length), 1


@dataclass(frozen=True)
class Settings:
    """Everything that must be equal for rows to decode in one call: the
    :class:`~unmask.request.DecodeRequest` without its seed (each row has its own) and its
    constraint (each row has its own too), the ``layout`` (:class:`Completion` or
    :class:`Templates`) and ``width``, the row's length alone (prompt slots and generated
    positions)."""

    request: DecodeRequest
    layout: type
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
    #: the request's :class:`~unmask.request.DecodeRequest` (its seed the request's first
    #: row's), recorded in the reply; its constraint is not a setting: rows with other
    #: constraints, or none, share a call (each row its own)
    request: DecodeRequest | None = None

    @property
    def constraint(self):
        """The language the rows' texts must belong to (a ConstraintSpec; None: free)."""
        return None if self.request is None else self.request.constraint


@dataclass
class Decoding:
    """A request body's unmask fields (any may be None: the server's default), which
    :class:`ServedModel` turns into the one :class:`~unmask.request.DecodeRequest`."""

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
        self._prepared: dict[str, str | None] = {}  # spec text -> why it cannot prepare
        self._check_start()

    def _check_start(self) -> None:
        """Refuse at start-up, naming the flag, what would fail every request: a
        ``--cache-kv`` the model cannot use, a default sampler that cannot prepare on this
        model (no estimator for it, a bad recommended setting beside its estimator)."""
        from unmask.kv_cache import check_cacheable

        for flag, check in (
                ("--cache-kv", lambda: self.options.cache_kv is None
                 or check_cacheable(self.model, self.options.cache_kv)),
                ("--sampler", lambda: self.check_prepares(
                    DecodeRequest(sampler=self.default_sampler), operator=True))):
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
        """The spec a request decodes with (parsed once, by its
        :class:`~unmask.request.DecodeRequest`)."""
        require(d.sampler is None or d.preset is None, "sampler: give sampler or preset, "
                                                       "not both")
        if d.preset is not None:  # the served model's own preset where it has one
            return model_preset_spec(d.preset, self.options.model)
        return self.default_sampler if d.sampler is None else request_sampler(d.sampler)

    def request(self, d: Decoding, *, seed: int | None, **layout) -> DecodeRequest:
        """The one :class:`~unmask.request.DecodeRequest` of a body's fields ``d``, its
        ``seed`` (None: a fresh one) and the ``layout`` settings the server resolved, with
        the server's own batch settings."""
        request = text_request(None, dict(
            sampler=self.sampler(d), temperature=float(d.temperature),
            confidence=d.confidence, seed=check_seed(seed), steps=d.steps,
            batch_invariant=self.options.batch_invariant, constraint=d.constraint, **layout))
        if d.sampler is not None:
            self.check_prepares(request)
        return request

    def check_prepares(self, request: DecodeRequest, operator: bool = False) -> None:
        """Refuse a request whose sampler cannot prepare on the served model (what it loads
        for this model, an estimator, is the server's own: a request cannot name one). The
        answer is kept per canonical spec text, so a sampler is built and prepared once per
        spec, not once per request."""
        key = request.sampler
        if key not in self._prepared:
            if len(self._prepared) >= 1024:  # bounded: requests may name many specs
                self._prepared.clear()
            try:
                request.build_sampler().prepare(self.model)
                self._prepared[key] = None
            except NoEstimator as e:
                self._prepared[key] = str(e) if operator else (
                    "sampler: this server has no MI estimator for its model (a request "
                    "cannot name one; its operator may serve one with --sampler "
                    "'mi-guided:estimator=FOLDER')")
            except UnmaskError as e:
                self._prepared[key] = str(e)
        require(self._prepared[key] is None, self._prepared[key] or "")

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
        check_prompt_texts([p for p, _ in prompts])
        block = d.block_length or gen_length
        request = self.request(
            d, seed=seed, gen_length=gen_length, block_length=block,
            min_new_tokens=d.min_new_tokens, cache_kv=self.options.cache_kv,
            pad_to_multiple_of=self.prompt_multiple(block) if is_int(block) else None)
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
                                   pad_to_multiple_of=request.pad_to_multiple_of)
            if d.constraint is not None:  # compiled and checked now: refused before a pass
                text_constraint(self.model, x, ends, d.constraint)
            settings = Settings(request.replace(seed=0, constraint=None), Completion,
                                x.shape[1])
            jobs.append(Job(settings, [ids] * n, [text] * n,
                            [request.seed + p * n + j for j in range(n)], stream,
                            request=request))
        return jobs

    def prompt_multiple(self, block: int) -> int:
        """What a completion row's prompt slots are rounded up to a multiple of."""
        return self.options.pad_to_multiple_of or block

    def infill_jobs(self, templates: list[str], *, seed: int | None, d: Decoding) -> list[Job]:
        """One job per template (seed ``seed + i``); :class:`UnmaskError` naming the field at
        fault."""
        require(0 < len(templates) <= self.options.max_n,
                f"template: give 1 to {self.options.max_n} templates, got {len(templates)}")
        request = self.request(d, seed=seed, block_length=d.block_length)
        jobs = []
        for i, template in enumerate(templates):
            plan = plan_infill(self.model, [template], block_length=d.block_length)
            x, _ = plan.batch(plan.encoded)
            settings = Settings(request.replace(seed=0, constraint=None), Templates, x.shape[1])
            jobs.append(Job(settings, plan.encoded, [template], [request.seed + i],
                            request=request))
        return jobs


def check_seed(seed: int | None) -> int:
    """``seed``, or a fresh random one for None; refuses one outside [0, 2**62]."""
    if seed is None:
        return secrets.randbelow(2**31)
    require(is_int(seed) and 0 <= seed <= MAX_SEED,
            f"seed: must be an integer in [0, 2**62], got {seed!r}")
    return int(seed)


def operator_sampler(text: str) -> str:
    """The canonical spec of the server's own sampler (any spec ``unmask generate`` takes)."""
    return text_request(None, {"sampler": text}).sampler


def request_sampler(text: str) -> str:
    """The canonical spec of a request's ``sampler``: as :func:`operator_sampler`, once
    :func:`~unmask.samplers.requests.check_request_spec` has found nothing a request may not
    ask (a parameter that may name a file, a word that is not plain, a cost out of bounds),
    before anything is built."""
    require(isinstance(text, str) and 0 < len(text.strip()) <= 256,
            "sampler: expected a spec such as 'confidence' or 'eb:gamma=0.1' (at most 256 "
            "characters)")
    check_request_spec(llada_named(text))
    return text
