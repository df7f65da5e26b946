from pathlib import Path

import pytest
import torch

import unmask
from unmask.models import ExactJointMDM, MDMTransformer, TransformerConfig


@pytest.fixture
def toy():
    """Exact MDM: N=5 positions over 3 tokens, a peaked random joint (strong dependence)."""
    return ExactJointMDM(n=5, v=3, seed=1, concentration=0.3)


@pytest.fixture
def tiny_transformer():
    torch.manual_seed(0)
    cfg = TransformerConfig(vocab_size=6, mask_id=5, max_length=12, d_model=16, n_layers=2,
                            n_heads=2, d_ff=32)
    return MDMTransformer(cfg).eval()


@pytest.fixture(scope="module")
def ray_session():
    """One local Ray instance for the module (engines reuse it and leave it running); its
    workers import this checkout's sources."""
    ray = pytest.importorskip("ray")
    src = str(Path(unmask.__file__).resolve().parents[1])
    ray.init(num_cpus=2, include_dashboard=False, logging_level="ERROR", log_to_driver=False,
             object_store_memory=1 << 29, runtime_env={"env_vars": {"PYTHONPATH": src}})
    yield ray
    ray.shutdown()
