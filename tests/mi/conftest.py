import itertools

import pytest
import torch

from unmask.models import ExactJointMDM
from unmask.models.base import ModelOutput


class PositionalToy(ExactJointMDM):
    """The exact toy MDM with hidden states that also carry the position (one-hot), as a real
    MDM's do; without it no head could tell two masked positions apart."""

    def __init__(self, **kw):
        super().__init__(**kw)
        self.hidden_size = self.v + 1 + self.n

    def forward(self, tokens, output_hidden_layers=False):
        out = super().forward(tokens, output_hidden_layers)
        pos = torch.eye(self.n, dtype=out.hidden.dtype).expand(tokens.shape[0], -1, -1)
        hidden = torch.cat([out.hidden, pos], -1)
        return ModelOutput(out.logits, hidden, (out.hidden, hidden) if output_hidden_layers
                           else None)


@pytest.fixture(scope="session")
def positional_toy():
    return PositionalToy(n=5, v=3, seed=1, concentration=0.3)


@pytest.fixture(scope="session")
def toy_contexts(positional_toy):
    """Every context of the toy (each position revealed as one of 3 tokens or masked) with at
    least two masked positions: (M, 5) tokens."""
    m = positional_toy
    states = torch.tensor(list(itertools.product(range(m.v + 1), repeat=m.n)))
    return states[(states == m.mask_id).sum(1) >= 2]


@pytest.fixture(autouse=True)
def one_thread():
    """These models are tiny: a second thread only adds contention on a shared machine."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
