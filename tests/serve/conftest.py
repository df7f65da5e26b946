"""Servers on loopback ports for the `unmask serve` tests (:mod:`serve_helpers`)."""

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
sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parents[1] / "hf"))

from serve_helpers import CHAT_TEMPLATE, Running  # noqa: E402

from unmask.serve.options import ServeOptions  # noqa: E402


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
