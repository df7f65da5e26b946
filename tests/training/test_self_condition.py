"""Self-conditioning: a grown model starts as the same function, training teaches it to read
its previous pass, and the decode loop hands each row its own previous beliefs."""

import pytest
import torch

from unmask import DecodeConfig, decode, make_sampler
from unmask.models.transformer import MDMTransformer
from unmask.probs import previous_pass_probs, real_log_probs
from unmask.sudoku.train import SudokuPool, sudoku_model_config
from unmask.training.loop import LoopConfig, TrainConfig
from unmask.training.mdm import masked_cross_entropy, train


def tiny(**overrides):
    torch.manual_seed(0)
    return MDMTransformer(sudoku_model_config(d_model=32, n_layers=2, n_heads=2, d_ff=64,
                                              **overrides)).eval()


def test_grown_model_is_the_same_function_whatever_it_is_given():
    model = tiny()
    grown = model.with_self_conditioning()
    assert grown.self_conditioning and not model.self_conditioning
    assert not grown.prev_embed.weight.any()
    tokens = torch.randint(0, 10, (3, 81))
    prev = torch.rand(3, 81, model.vocab_size)
    with torch.no_grad():
        a = model(tokens).logits
        torch.testing.assert_close(grown(tokens).logits, a, rtol=0, atol=0)
        torch.testing.assert_close(grown(tokens, prev_probs=prev).logits, a, rtol=0, atol=0)
        # once the map is not zero, the previous pass changes the output
        grown.prev_embed.weight.normal_(0, 1.0)
        assert not torch.allclose(grown(tokens, prev_probs=prev).logits, a)
        torch.testing.assert_close(grown(tokens).logits, a, rtol=0, atol=0)


def test_previous_pass_probs_are_distributions_at_masked_positions_only():
    model = tiny(self_condition=True)
    tokens = torch.randint(0, 10, (2, 81))
    masked = tokens == model.mask_id
    probs = previous_pass_probs(real_log_probs(model(tokens).logits, model.real_token_mask).exp(),
                                masked)
    torch.testing.assert_close(probs.sum(-1), masked.float())
    assert not probs[..., model.mask_id].any()


def test_training_with_self_conditioning_teaches_the_map(tmp_path):
    pool = SudokuPool.generate(50, seed=4)
    model = tiny().with_self_conditioning()
    inputs, targets, mask = pool.batch(0, 8)
    model.train()
    masked_cross_entropy(model, inputs, targets, mask, self_condition=True).backward()
    assert model.prev_embed.weight.grad.abs().sum() > 0
    model.zero_grad()
    masked_cross_entropy(model, inputs, targets, mask).backward()  # no previous pass
    assert model.prev_embed.weight.grad is None or not model.prev_embed.weight.grad.any()
    cfg = TrainConfig(loop=LoopConfig(batch_size=8, lr=3e-3, warmup_steps=1, total_steps=4,
                                      eval_every=4, grad_clip=1.0), bf16=False)
    train(model, lambda s, b: pool.batch(s, b), cfg, tmp_path, log=lambda s: None)
    assert model.prev_embed.weight.any()


class Recording(MDMTransformer):
    """Records the ``prev_probs`` of every call and the probabilities each call produced."""

    def forward(self, tokens, output_hidden_layers=False, prev_probs=None):
        out = super().forward(tokens, output_hidden_layers, prev_probs)
        self.calls.append((tokens.clone(), None if prev_probs is None else prev_probs.clone(),
                           out.logits.clone()))
        return out


@pytest.mark.parametrize("feed", [True, False])
def test_decode_gives_each_row_the_beliefs_of_its_previous_pass(feed):
    torch.manual_seed(1)
    model = Recording(sudoku_model_config(d_model=32, n_layers=2, n_heads=2, d_ff=64,
                                          self_condition=True)).eval()
    with torch.no_grad():
        model.prev_embed.weight.normal_(0, 1.0)
    model.calls = []
    tokens = torch.randint(0, 9, (3, 81))
    tokens[0, :6] = model.mask_id
    tokens[1, :2] = model.mask_id  # finishes first: the batch shrinks under the loop
    tokens[2, 10:15] = model.mask_id
    res = decode(model, tokens, make_sampler("topk", k=2),
                 DecodeConfig(self_condition=feed))
    assert res.nfe.tolist() == [3, 1, 3]
    rows = [torch.tensor([0, 1, 2]), torch.tensor([0, 2]), torch.tensor([0, 2])]
    for step, (x, prev, _) in enumerate(model.calls):
        assert len(x) == len(rows[step])
        if not feed:
            assert prev is None
            continue
        if step == 0:
            assert not prev.any()
            continue
        # the previous call's beliefs, for the same original rows, at positions still masked
        _, _, before_logits = model.calls[step - 1]
        keep = torch.isin(rows[step - 1], rows[step])
        expected = previous_pass_probs(
            real_log_probs(before_logits[keep], model.real_token_mask).exp(), x == model.mask_id)
        torch.testing.assert_close(prev, expected)
