import pytest
import torch

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
