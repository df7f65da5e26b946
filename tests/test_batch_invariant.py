"""``DecodeConfig(batch_invariant=True)``: the loop's pass runs one row at a time, on the
positions the row computes alone, so a row's tokens cannot depend on the rows beside it; and
``unmask.compiled``: the model's forward under torch.compile gives the same tokens."""

import pytest
import torch

from unmask import DecodeConfig, UnmaskError, decode
from unmask.compiled import compiled
from unmask.models.toy import FixedOutputModel


class Recording(FixedOutputModel):
    """The zero-cost model, recording each call's batch size and logits positions."""

    def __init__(self, **kw):
        super().__init__(**kw)
        self.calls = []

    def forward(self, tokens, output_hidden_layers=False, output_attentions=False,
                logits_positions=None):
        self.calls.append((tokens.shape[0], logits_positions))
        return super().forward(tokens, output_hidden_layers, output_attentions,
                               logits_positions)


def _rows_in_different_blocks(model):
    """Three rows of 24 positions in blocks of 8: row 0 starts in block 1 (block 0 given),
    rows 1 and 2 in block 0, so a batched pass spans blocks 0-1 and row 0 alone block 1."""
    x = torch.full((3, 24), model.mask_id, dtype=torch.long)
    x[0, :8] = torch.arange(8) % model.v
    x[2, 3] = 1
    return x


@pytest.mark.parametrize("spec", ["confidence", "topk:k=3", "threshold:tau=0.5", "eb"])
def test_every_pass_is_a_row_at_its_own_positions_and_rows_decode_as_alone(spec):
    model = Recording(n=24, v=5, seed=2)
    x = _rows_in_different_blocks(model)
    cfg = DecodeConfig(block_size=8, batch_invariant=True)
    res = decode(model, x, spec, cfg, seed=5)
    assert {b for b, _ in model.calls} == {1}
    # narrow passes: each call computes one block of 8 (the row's own), never the span 0:16
    assert {cols.stop - cols.start for _, cols in model.calls} == {8}
    for r in range(3):
        alone = decode(model, x[r:r + 1], spec, DecodeConfig(block_size=8), seed=5 + r)
        assert torch.equal(res.tokens[r], alone.tokens[0])
        assert torch.equal(res.reveal_step[r], alone.reveal_step[0])
        assert res.nfe[r] == alone.nfe[0]


def test_batch_invariant_decodes_the_tokens_of_the_batched_pass_on_the_cpu(tiny_transformer):
    """The tiny transformer's batched pass equals its rows on the CPU: both modes agree."""
    x = torch.full((4, 12), tiny_transformer.mask_id, dtype=torch.long)
    x[1, :3] = torch.tensor([1, 2, 3])
    for spec in ("confidence", "eb", "mi-oracle:gamma=1.0,eps=0.0"):
        cfgs = [DecodeConfig(block_size=4, batch_invariant=b, temperature=1.0)
                for b in (False, True)]
        a, b = (decode(tiny_transformer, x, spec, c, seed=3) for c in cfgs)
        assert torch.equal(a.tokens, b.tokens) and torch.equal(a.nfe, b.nfe)


def test_batch_invariant_must_be_a_bool():
    with pytest.raises(UnmaskError, match="batch_invariant"):
        DecodeConfig(batch_invariant=1)


@pytest.mark.slow
def test_compiled_forward_gives_the_eager_tokens(tiny_transformer):
    """torch.compile on the CPU (default mode), one shape: the same tokens, the forward
    restored after."""
    x = torch.full((2, 12), tiny_transformer.mask_id, dtype=torch.long)
    eager = decode(tiny_transformer, x, "topk:k=2", seed=1)
    with compiled(tiny_transformer):
        assert "forward" in vars(tiny_transformer)
        fast = decode(tiny_transformer, x, "topk:k=2", seed=1)
    assert "forward" not in vars(tiny_transformer)
    assert torch.equal(eager.tokens, fast.tokens)
