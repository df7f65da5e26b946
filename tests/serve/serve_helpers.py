"""Helpers of the `unmask serve` tests: a served model on a loopback port (a uvicorn thread
of this process) and small HTTP helpers (the `openai` client is what the tests talk
through; raw requests only where it cannot send what is tested)."""

import http.client
import json

from unmask.serve.app import create_app
from unmask.serve.jobs import ServedModel
from unmask.serve.options import ServeOptions
from unmask.serve.run import ServerThread

#: a chat template for folders without one: the user turns, then "A: "
CHAT_TEMPLATE = ("{% for m in messages %}{{ m['role'][0] | upper }}: {{ m['content'] }}\n"
                 "{% endfor %}{% if add_generation_prompt %}A: {% endif %}")


class Running:
    """A served model on a loopback port: ``served``, ``app``, ``url`` (``.../v1``),
    ``batcher``, and ``client()`` (an ``openai.OpenAI`` on it)."""

    def __init__(self, options: ServeOptions):
        self.options = options
        self.served = ServedModel.load(options)
        self.app = create_app(self.served)
        self.batcher = self.app.state.batcher
        self.thread = ServerThread(self.app, options)

    def __enter__(self):
        self.thread.__enter__()
        self.url, self.port = self.thread.url, self.thread.port
        return self

    def __exit__(self, *exc):
        self.thread.__exit__(*exc)

    def client(self, **kwargs):
        import openai

        return openai.OpenAI(base_url=self.url, api_key="unused", max_retries=0, timeout=120,
                             **kwargs)


def post(port: int, path: str, body: bytes | dict | str, headers: dict | None = None
         ) -> tuple[int, dict | None, str]:
    """(status, JSON body or None, raw text) of a POST on 127.0.0.1:port."""
    data = json.dumps(body).encode() if isinstance(body, dict) else (
        body.encode() if isinstance(body, str) else body)
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    try:
        conn.request("POST", path, data, {"Content-Type": "application/json",
                                          **(headers or {})})
        resp = conn.getresponse()
        raw = resp.read().decode("utf-8", "replace")
    finally:
        conn.close()
    try:
        parsed = json.loads(raw)
    except ValueError:
        parsed = None
    return resp.status, parsed, raw


def get(port: int, path: str, timeout: float = 60) -> tuple[int, dict]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("GET", path)
        resp = conn.getresponse()
        return resp.status, json.loads(resp.read())
    finally:
        conn.close()


