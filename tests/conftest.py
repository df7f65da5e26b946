from pathlib import Path

import pytest
import torch

import unmask
from unmask.image.classifier import ClassifierConfig, DigitClassifier
from unmask.image.data import image_model_config
from unmask.image.model import DigitsMDM
from unmask.models import ExactJointMDM, MDMTransformer, TransformerConfig


@pytest.fixture
def toy():
    """Exact MDM: N=5 positions over 3 tokens, a peaked random joint (strong dependence)."""
    return ExactJointMDM(n=5, v=3, seed=1, concentration=0.3)


@pytest.fixture(scope="session")
def tiny_digits(tmp_path_factory):
    """A folder with a tiny digits MDM (``mdm``) and digit classifier (``clf``)."""
    root = tmp_path_factory.mktemp("digits")
    torch.manual_seed(0)
    DigitsMDM(image_model_config(9, d_model=16, n_layers=1, n_heads=2, d_ff=32,
                                 dropout=0.0)).save_pretrained(root / "mdm")
    DigitClassifier(ClassifierConfig(channels=4, features=8)).save_pretrained(root / "clf")
    return root


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
