"""OpenAI's response bodies and stream chunks from decoded rows
(:class:`~unmask.generate.Generation` s), with stop strings applied.

A choice's text is the generated text up to the first EOS (as :func:`unmask.generate.generate`
gives it), cut before the first stop string; its ``finish_reason`` is ``stop`` when a stop
string or EOS ended it, ``length`` when it filled ``max_tokens``. Each choice carries unmask's
numbers under ``unmask``: forward passes, sequences evaluated, tokens per pass, the seed; the
answer's own ``unmask`` holds the request's settings as one
:class:`~unmask.request.DecodeRequest` (its JSON form).
"""

from __future__ import annotations

from unmask.serve.jobs import Job, ServedModel
from unmask.serve.schemas import new_id, now, unmask_stats, usage


def cut_at_stop(text: str, stops: list[str]) -> tuple[str, bool]:
    """``text`` before its first stop string, and whether one was found."""
    at = min((i for i in (text.find(s) for s in stops) if i >= 0), default=-1)
    return (text, False) if at < 0 else (text[:at], True)


def held_back(text: str, stops: list[str]) -> int:
    """How many trailing characters of ``text`` could begin a stop string (not sent yet)."""
    return max((k for s in stops for k in range(min(len(s) - 1, len(text)), 0, -1)
                if text.endswith(s[:k])), default=0)


class Replies:
    """The bodies of one request's answer (``chat``: chat completion shapes)."""

    def __init__(self, served: ServedModel, model: str, *, chat: bool,
                 stops: list[str] | None = None):
        self.served, self.model, self.chat, self.stops = served, model, chat, stops or []
        self.id = new_id("chatcmpl" if chat else "cmpl")
        self.created = now()
        self.eos = set(getattr(served.model, "eos_ids", ()))

    def text_of(self, ids: list[int]) -> str:
        """The text of generated ``ids`` up to the first EOS (as ``generate`` reads it)."""
        cut = next((i for i, t in enumerate(ids) if t in self.eos), len(ids))
        return self.served.tokenizer.decode(ids[:cut], skip_special_tokens=True,
                                            clean_up_tokenization_spaces=False)

    def finish(self, gen) -> tuple[str, str, int]:
        """(text, finish_reason, completion tokens) of a decoded row."""
        text, stopped = cut_at_stop(gen.text, self.stops)
        if stopped:
            tokens = len(self.served.tokenizer(text, add_special_tokens=False)["input_ids"])
            return text, "stop", tokens
        ended = next((i for i, t in enumerate(gen.token_ids) if t in self.eos), None)
        return text, ("length" if ended is None else "stop"), (
            len(gen.token_ids) if ended is None else ended)

    def _head(self, obj: str) -> dict:
        return {"id": self.id, "object": obj, "created": self.created, "model": self.model}

    def complete(self, jobs: list[Job], results: list[list]) -> dict:
        """The whole answer of a completion or chat request."""
        choices, generated = [], 0
        for job, rows in zip(jobs, results, strict=True):
            for gen, seed in zip(rows, job.seeds, strict=True):
                text, reason, tokens = self.finish(gen)
                generated += tokens
                choice = {"index": len(choices), "finish_reason": reason, "logprobs": None,
                          "unmask": unmask_stats(gen, seed)}
                if self.chat:
                    choice["message"] = {"role": "assistant", "content": text}
                else:
                    choice["text"] = text
                choices.append(choice)
        prompt = sum(len(job.rows[0]) for job in jobs)
        return {**self._head("chat.completion" if self.chat else "text_completion"),
                "choices": choices, "usage": usage(prompt, generated), **_request(jobs)}

    def infill(self, jobs: list[Job], results: list[list]) -> dict:
        """The answer of an infill request: each template filled."""
        choices, filled = [], 0
        for job, rows in zip(jobs, results, strict=True):
            mask_id = self.served.model.mask_id
            for gen, seed, ids in zip(rows, job.seeds, job.rows, strict=True):
                filled += ids.count(mask_id)
                choices.append({"index": len(choices), "template": gen.prompt,
                                "text": gen.text, "unmask": unmask_stats(gen, seed)})
        prompt = sum(len(job.rows[0]) for job in jobs)
        return {**self._head("infill"), "choices": choices, "usage": usage(prompt, filled),
                **_request(jobs)}

    def stream_state(self, jobs: list[Job]) -> StreamState:
        return StreamState(self, jobs)


class StreamState:
    """What a streamed answer has sent: each choice's text so far (a stop string's possible
    beginning held back until the next block says more)."""

    def __init__(self, replies: Replies, jobs: list[Job]):
        self.r = replies
        self.index = {}
        for job in jobs:
            for row in range(len(job.rows)):
                self.index[(id(job), row)] = len(self.index)
        self.sent = [""] * len(self.index)
        self.stopped = [False] * len(self.index)
        self.prompt_tokens = sum(len(job.rows[0]) for job in jobs)
        self.generated = 0

    def _chunk(self, choices: list[dict]) -> dict:
        obj = "chat.completion.chunk" if self.r.chat else "text_completion"
        return {**self.r._head(obj), "choices": choices}

    def _choice(self, i: int, delta: str, reason: str | None = None) -> dict:
        out = {"index": i, "finish_reason": reason, "logprobs": None}
        if self.r.chat:
            out["delta"] = {"content": delta} if delta or reason is None else {}
        else:
            out["text"] = delta
        return out

    def start(self) -> list[dict]:
        """The chunks before any text (chat: each choice's assistant role)."""
        if not self.r.chat:
            return []
        return [self._chunk([{"index": i, "delta": {"role": "assistant", "content": ""},
                              "finish_reason": None, "logprobs": None}
                             for i in range(len(self.sent))])]

    def _advance(self, i: int, text: str, final: bool) -> str:
        """The new text of choice ``i`` whose text is now ``text``."""
        if self.stopped[i]:
            return ""
        text, self.stopped[i] = cut_at_stop(text, self.r.stops)
        if not (final or self.stopped[i]):
            text = text[:len(text) - held_back(text, self.r.stops)]
        if not text.startswith(self.sent[i]) or len(text) <= len(self.sent[i]):
            return ""
        delta, self.sent[i] = text[len(self.sent[i]):], text
        return delta

    def blocks(self, job: Job, row: int, ids: list[int]) -> dict | None:
        """The chunk of a row's newly committed blocks (None: nothing new to send)."""
        i = self.index[(id(job), row)]
        delta = self._advance(i, self.r.text_of(ids), final=False)
        return self._chunk([self._choice(i, delta)]) if delta else None

    def done(self, job: Job, rows: list) -> dict:
        """The last chunk of each choice of a finished job: its rest, finish reason and
        unmask's numbers."""
        choices = []
        for row, (gen, seed) in enumerate(zip(rows, job.seeds, strict=True)):
            i = self.index[(id(job), row)]
            stopped_before = self.stopped[i]
            delta = self._advance(i, gen.text, final=True)
            text, reason, tokens = self.r.finish(gen)
            self.generated += tokens
            if stopped_before:
                reason = "stop"
            choice = self._choice(i, delta, reason)
            choice["unmask"] = unmask_stats(gen, seed)
            choices.append(choice)
        return self._chunk(choices)

    def usage_chunk(self) -> dict:
        return {**self._chunk([]), "usage": usage(self.prompt_tokens, self.generated)}


def _request(jobs: list[Job]) -> dict:
    """The answer's ``unmask`` object: the request's :class:`~unmask.request.DecodeRequest`
    as JSON (``DecodeRequest.from_json`` gives it back; row i decoded with its seed + i)."""
    request = jobs[0].request if jobs else None
    return {} if request is None else {"unmask": {"request": request.to_json()}}
