"""The transformer block's explicit attention weights are the ones its fused forward uses."""

import torch

from unmask.models.transformer import MDMTransformer
from unmask.sudoku.train import sudoku_model_config


def test_attention_probs_reproduce_the_block_forward():
    torch.manual_seed(0)
    model = MDMTransformer(sudoku_model_config(d_model=32, n_layers=2, n_heads=4, d_ff=64)).eval()
    blk = model.blocks[1]
    with torch.no_grad():
        blk.rel_bias.normal_(0, 1.0)  # make the same row/column/box bias matter
        tokens = torch.randint(0, 10, (3, 81))
        x = model.blocks[0](model.embed(tokens), model.relations)
        probs = blk.attention_probs(x, model.relations)
        assert probs.shape == (3, 4, 81, 81)
        torch.testing.assert_close(probs.sum(-1), torch.ones(3, 4, 81))
        # probs @ v through the rest of the block is the block's fused forward
        b, n, d = x.shape
        v = blk.qkv(blk.ln1(x)).view(b, n, 3, 4, d // 4)[:, :, 2].transpose(1, 2)
        att = (probs @ v).transpose(1, 2).reshape(b, n, d)
        x1 = x + blk.proj(att)
        torch.testing.assert_close(x1 + blk.ff(blk.ln2(x1)), blk(x, model.relations),
                                   rtol=1e-5, atol=1e-5)
