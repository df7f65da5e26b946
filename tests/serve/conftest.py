"""Servers on loopback ports for the `unmask serve` tests, each on a uvicorn thread of this
process, and small HTTP helpers (the `openai` client is what the tests talk through; raw
requests only where it cannot send what is tested)."""

import http.client
import json
import os
import sys
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
pytest.importorskip("openai")
pytest.importorskip("transformers")
sys.path.insert(0, str(Path(__file__).parents[1] / "hf"))

from unmask.serve.app import create_app  # noqa: E402
from unmask.serve.jobs import ServedModel  # noqa: E402
from unmask.serve.options import ServeOptions  # noqa: E402
from unmask.serve.run import ServerThread  # noqa: E402

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


def get(port: int, path: str) -> tuple[int, dict]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        conn.request("GET", path)
        resp = conn.getresponse()
        return resp.status, json.loads(resp.read())
    finally:
        conn.close()


@pytest.fixture(scope="session")
def text_server():
    """The shipped text MDM, a chat template given, a wide batch window (so that concurrent
    requests share calls)."""
    with Running(ServeOptions(model="text", chat_template=CHAT_TEMPLATE, max_batch=16,
                              batch_wait_ms=200, max_tokens=64, threads=1)) as s:
        yield s


@pytest.fixture(scope="session")
def llada_server(tmp_path_factory):
    """A tiny LLaDA-style folder (its modelling code inside, run with trust_remote_code)."""
    import tiny_models

    folder = tiny_models.write_llada(tmp_path_factory.mktemp("serve-llada") / "llada")
    with Running(ServeOptions(model=str(folder), trust_remote_code=True, served_name="llada",
                              chat_template=CHAT_TEMPLATE, max_tokens=32,
                              batch_wait_ms=50)) as s:
        yield s


@pytest.fixture(scope="session")
def protein_server():
    """The shipped protein MDM (0.8M parameters, residue templates)."""
    with Running(ServeOptions(model="protein", batch_wait_ms=50)) as s:
        yield s
