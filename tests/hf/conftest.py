import os
import sys
from pathlib import Path

import pytest

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
pytest.importorskip("transformers")
sys.path.insert(0, str(Path(__file__).parent))

import tiny_models  # noqa: E402


@pytest.fixture(scope="session")
def bert_dir(tmp_path_factory):
    return tiny_models.write_bert(tmp_path_factory.mktemp("bert") / "m")


@pytest.fixture(scope="session")
def llada_dir(tmp_path_factory):
    return tiny_models.write_llada(tmp_path_factory.mktemp("llada") / "m")


@pytest.fixture(scope="session")
def causal_llada_dir(tmp_path_factory):
    return tiny_models.write_llada(tmp_path_factory.mktemp("cllada") / "m", causal=True, seed=1)


@pytest.fixture(scope="module")
def eager_attention():
    """torch.compile off (LLaDA's modelling code compiles its attention function)."""
    import torch._dynamo

    with torch._dynamo.config.patch(disable=True):
        yield
