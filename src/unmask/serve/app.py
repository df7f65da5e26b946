"""The ASGI application of ``unmask serve`` (FastAPI): OpenAI's completions, chat completions
and models endpoints, ``/v1/infill`` and ``/health``, over one model and one
:class:`~unmask.serve.batching.Batcher`.

Bad input is answered with OpenAI's error body: 400 for a malformed or invalid request, 404
for another model's name, 413 for a body over the limit, 429 when the server holds as many
rows as it may; a request's rows leave their decode call when its client disconnects.
A request's jobs are built (tokenised, checked, a constraint compiled) on one thread of
their own, one request at a time, so a slow build never stalls the event loop: health
checks, streams and disconnects are answered meanwhile.
"""

from __future__ import annotations

import asyncio
import json
from concurrent.futures import ThreadPoolExecutor
from functools import partial

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import ValidationError
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect

from unmask.errors import UnmaskError
from unmask.serve import schemas
from unmask.serve.batching import Batcher, Busy, OverBudget, Ticket
from unmask.serve.decoding import decode_jobs
from unmask.serve.jobs import ServedModel
from unmask.serve.replies import Replies


class ApiError(Exception):
    """An error answered with OpenAI's error body and ``status``."""

    def __init__(self, status: int, message: str, kind: str = "invalid_request_error",
                 code: str | None = None):
        super().__init__(message)
        self.status, self.message, self.kind, self.code = status, message, kind, code


def create_app(served: ServedModel) -> FastAPI:
    """The application serving ``served`` (its options give the batching and the limits)."""
    opts = served.options
    batcher = Batcher(partial(decode_jobs, served), max_batch=opts.max_batch,
                      wait_s=opts.batch_wait_ms / 1000.0, max_rows=opts.max_queue_rows,
                      budget_s=opts.max_decode_s)
    app = FastAPI(title="unmask", docs_url=None, redoc_url=None, openapi_url=None)
    app.state.served, app.state.batcher = served, batcher
    app.state.builder = ThreadPoolExecutor(1, thread_name_prefix="unmask-build")
    app.add_middleware(BodyLimit, limit=opts.max_body_bytes)
    _errors(app)
    _routes(app, served, batcher, partial(_build, app.state.builder))
    return app


def _errors(app: FastAPI) -> None:
    def reply(status, message, kind="invalid_request_error", code=None):
        return JSONResponse(schemas.error_body(message, kind, code=code), status_code=status)

    @app.exception_handler(ApiError)
    async def api_error(request, e: ApiError):
        return reply(e.status, e.message, e.kind, e.code)

    @app.exception_handler(RequestValidationError)
    async def invalid(request, e):
        return reply(400, "body: invalid request")

    @app.exception_handler(HTTPException)
    async def http_error(request, e: HTTPException):
        kind = "invalid_request_error" if e.status_code < 500 else "server_error"
        return reply(e.status_code, str(e.detail), kind)

    @app.exception_handler(Exception)
    async def internal(request, e: Exception):
        return reply(500, f"internal error: {type(e).__name__}", "server_error")


def _routes(app: FastAPI, served: ServedModel, batcher: Batcher, build) -> None:
    @app.get("/health")
    async def health():
        return {"status": "ok", "model": served.name, "rows_held": batcher.rows_held,
                **batcher.totals}

    @app.get("/v1/models")
    async def models():
        return {"object": "list", "data": [_model_card(served)]}

    @app.get("/v1/models/{name:path}")
    async def model(name: str):
        _check_model(served, name)
        return _model_card(served)

    @app.post("/v1/completions")
    async def completions(request: Request):
        body = await _parse(request, schemas.CompletionRequest)
        _check_model(served, body.model)
        many = len(body.prompts) > 1
        prompts = await build(lambda: [(p, served.encode(p, where=f"prompt {i}" if many
                                                          else "prompt"))
                                        for i, p in enumerate(body.prompts)])
        return await _generate(request, served, batcher, build, body, prompts,
                               body.max_tokens, chat=False)

    @app.post("/v1/chat/completions")
    async def chat(request: Request):
        body = await _parse(request, schemas.ChatRequest)
        _check_model(served, body.model)
        messages = [m.plain() for m in body.messages]
        prompts = await build(lambda: [("", served.encode(messages=messages))])
        return await _generate(request, served, batcher, build, body, prompts,
                               body.gen_length, chat=True)

    @app.post("/v1/infill")
    async def infill(request: Request):
        body = await _parse(request, schemas.InfillRequest)
        _check_model(served, body.model)
        jobs = await build(lambda: served.infill_jobs(body.templates, seed=body.seed,
                                                      d=body.decoding()))
        tickets = _submit(batcher, jobs)
        results = await _results(request, batcher, tickets)
        return Replies(served, body.model, chat=False).infill(jobs, results)


async def _generate(request: Request, served: ServedModel, batcher: Batcher, build, body,
                    prompts: list, gen_length: int | None, *, chat: bool):
    """Queue a completion or chat request and answer it (a JSON body, or an event stream)."""
    jobs = await build(lambda: served.generate_jobs(prompts, n=body.n, gen_length=gen_length,
                                                    seed=body.seed,
                                                    d=body.decoding(body.min_new_tokens),
                                                    stream=body.stream, chat=chat))
    replies = Replies(served, body.model, chat=chat, stops=body.stops)
    if not body.stream:
        tickets = _submit(batcher, jobs)
        return replies.complete(jobs, await _results(request, batcher, tickets))
    events: asyncio.Queue = asyncio.Queue()
    tickets = _submit(batcher, jobs, events)
    usage = body.stream_options is not None and body.stream_options.include_usage
    return StreamingResponse(_stream(replies, batcher, jobs, tickets, events, usage),
                             media_type="text/event-stream",
                             headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})


async def _stream(replies: Replies, batcher: Batcher, jobs, tickets: list[Ticket],
                  events: asyncio.Queue, usage: bool):
    """Server-sent events: a chunk per committed block of each choice, its last text and
    finish reason when its decode ends, then ``[DONE]``."""
    state = replies.stream_state(jobs)
    try:
        for chunk in state.start():
            yield _sse(chunk)
        left = len(tickets)
        while left:
            kind, ticket, *rest = await events.get()
            if kind == "blocks":
                chunk = state.blocks(ticket.job, *rest)
            else:
                left -= 1
                chunk = state.done(ticket.job, _outcome(ticket))
            if chunk is not None:
                yield _sse(chunk)
        if usage:
            yield _sse(state.usage_chunk())
    except ApiError as e:
        yield _sse(schemas.error_body(e.message, e.kind, code=e.code))
    except Exception as e:  # noqa: BLE001 - the stream ends with an error event, not a drop
        yield _sse(schemas.error_body(f"internal error: {type(e).__name__}", "server_error"))
    finally:
        batcher.cancel([t for t in tickets if not t.result.done()])
    yield "data: [DONE]\n\n"


def _sse(obj: dict) -> str:
    return f"data: {json.dumps(obj, separators=(',', ':'))}\n\n"


def _outcome(ticket: Ticket) -> list:
    """A finished ticket's rows, or its decode error as an :class:`ApiError`."""
    if ticket.result.cancelled():
        raise ApiError(499, "the request was cancelled")
    e = ticket.result.exception()
    if e is None:
        return ticket.result.result()
    raise _decode_error(e)


def _decode_error(e: BaseException) -> ApiError:
    if isinstance(e, OverBudget):
        return ApiError(400, str(e), code="decode_budget_exceeded")
    if isinstance(e, UnmaskError):
        return ApiError(400, " ".join(str(e).split()))
    return ApiError(500, f"internal error while decoding: {type(e).__name__}", "server_error")


async def _parse(request: Request, cls):
    """The request body as ``cls``, or a 400 naming what is wrong."""
    try:
        raw = await request.body()
    except ClientDisconnect:  # gone, or its body was late (the guard answered 408)
        raise ApiError(499, "the client disconnected") from None
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError):
        raise ApiError(400, "body: not valid JSON") from None
    if not isinstance(data, dict):
        raise ApiError(400, "body: expected a JSON object")
    try:
        return cls.model_validate(data)
    except ValidationError as e:
        raise ApiError(400, schemas.first_error(e)) from None
    except RecursionError:
        raise ApiError(400, "body: nested too deeply") from None


async def _build(builder: ThreadPoolExecutor, make):
    """``make()`` on the ``builder`` thread (the event loop runs on meanwhile), its refusal
    of the request's values answered 400."""
    try:
        return await asyncio.get_running_loop().run_in_executor(builder, make)
    except UnmaskError as e:
        raise ApiError(400, " ".join(str(e).split())) from None
    except (ValueError, TypeError, OverflowError, RecursionError, IndexError) as e:
        raise ApiError(400, f"request: cannot be read ({type(e).__name__})") from None


def _submit(batcher: Batcher, jobs, events: asyncio.Queue | None = None) -> list[Ticket]:
    try:
        tickets = batcher.submit(jobs, events)
    except Busy as e:
        raise ApiError(429, str(e), "rate_limit_error", "server_busy") from None
    if events is not None:
        for t in tickets:
            t.result.add_done_callback(lambda _f, t=t: events.put_nowait(("done", t)))
    return tickets


async def _results(request: Request, batcher: Batcher, tickets: list[Ticket]) -> list:
    """Every ticket's rows, in order; the tickets are cancelled if the client goes first."""
    everything = asyncio.gather(*(t.result for t in tickets))
    # retrieved here whatever happens: a gone client's cancelled tickets end it with an
    # error nobody else reads (asyncio would log it)
    everything.add_done_callback(lambda f: f.cancelled() or f.exception())
    gone = asyncio.ensure_future(_disconnected(request))
    try:
        await asyncio.wait({everything, gone}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        gone.cancel()
    if not everything.done():
        batcher.cancel(tickets)
        everything.cancel()
        raise ApiError(499, "the client disconnected")
    try:
        return everything.result()
    except asyncio.CancelledError:
        raise ApiError(499, "the request was cancelled") from None
    except Exception as e:  # noqa: BLE001 - the decode's error, answered in one line
        raise _decode_error(e) from None


async def _disconnected(request: Request) -> None:
    while (await request.receive())["type"] != "http.disconnect":
        pass


def _check_model(served: ServedModel, name: str) -> None:
    if name != served.name:
        raise ApiError(404, f"model: {name[:100]!r} is not served here (this server serves "
                            f"{served.name!r} only)", code="model_not_found")


def _model_card(served: ServedModel) -> dict:
    return {"id": served.name, "object": "model", "created": 0, "owned_by": "unmask",
            "max_model_len": served.model.max_length}


class BodyLimit:
    """ASGI middleware: a request body over ``limit`` bytes is answered 413 (by its
    Content-Length at once, or when the bytes read pass the limit)."""

    def __init__(self, app, limit: int):
        self.app, self.limit = app, limit

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        length = dict(scope.get("headers") or []).get(b"content-length")
        if length is not None and (not length.isdigit() or int(length) > self.limit):
            response = JSONResponse(schemas.error_body(
                f"body: larger than the server's limit of {self.limit} bytes",
                code="request_too_large"), status_code=413)
            return await response(scope, receive, send)
        seen = 0

        async def limited():
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.limit:
                    raise ApiError(413, f"body: larger than the server's limit of "
                                        f"{self.limit} bytes", code="request_too_large")
            return message

        return await self.app(scope, limited, send)
