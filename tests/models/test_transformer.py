"""The transformer block's explicit attention weights are the ones its fused forward uses."""

import pytest
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


def test_deepened_model_computes_the_same_function_and_can_grow():
    torch.manual_seed(0)
    model = MDMTransformer(sudoku_model_config(d_model=32, n_layers=2, n_heads=4, d_ff=64)).eval()
    with torch.no_grad():
        for blk in model.blocks:
            blk.rel_bias.normal_(0, 1.0)
    deep = model.deepened(3)
    assert deep.config.n_layers == 6 and len(deep.blocks) == 6
    assert model.config.n_layers == 2  # the source model is untouched
    tokens = torch.randint(0, 10, (4, 81))
    with torch.no_grad():
        a, b = model(tokens), deep(tokens)
    torch.testing.assert_close(b.logits, a.logits, rtol=0, atol=0)
    torch.testing.assert_close(b.hidden, a.hidden, rtol=0, atol=0)
    # block 3 = block 1 itself; blocks 4 and 5 copy its reading weights and write nothing yet
    torch.testing.assert_close(deep.blocks[3].qkv.weight, model.blocks[1].qkv.weight)
    for copy in (deep.blocks[4], deep.blocks[5]):
        torch.testing.assert_close(copy.qkv.weight, model.blocks[1].qkv.weight)
        torch.testing.assert_close(copy.rel_bias, model.blocks[1].rel_bias)
        assert not copy.proj.weight.any() and not copy.ff[2].weight.any()
    assert deep.blocks[4].qkv.weight.data_ptr() != model.blocks[1].qkv.weight.data_ptr()
    # the silent copies learn: their output projections get gradient at once
    deep.train()
    out = deep(tokens).logits
    torch.nn.functional.cross_entropy(out.reshape(-1, 10), tokens.reshape(-1)).backward()
    assert deep.blocks[4].proj.weight.grad.abs().sum() > 0
    assert deep.blocks[5].ff[2].weight.grad.abs().sum() > 0
    assert model.deepened(1).config.n_layers == 2


def test_deepened_refuses_a_bad_factor():
    import pytest

    from unmask.errors import UnmaskError

    model = MDMTransformer(sudoku_model_config(d_model=16, n_layers=1, n_heads=2, d_ff=32))
    for bad in (0, -1, 1.5):
        with pytest.raises(UnmaskError, match="factor"):
            model.deepened(bad)


def test_a_grid_embedding_takes_its_board_from_the_task():
    """The model layer assumes no board: 'grid' needs grid_side and grid_box (Sudoku's 9 and 3
    are given by unmask.sudoku.train.sudoku_model_config)."""
    from unmask.errors import UnmaskError
    from unmask.models.transformer import TransformerConfig
    from unmask.sudoku.train import sudoku_model_config

    with pytest.raises(UnmaskError, match="grid_side, grid_box: a grid position embedding"):
        TransformerConfig(vocab_size=10, mask_id=9, max_length=81, position="grid")
    cfg = sudoku_model_config()
    assert (cfg.grid_side, cfg.grid_box, cfg.max_length) == (9, 3, 81)
    four = TransformerConfig(vocab_size=5, mask_id=4, max_length=16, position="grid",
                             grid_side=4, grid_box=2)
    assert four.grid_side == 4
