"""More model families through HFMaskedModel built from a loaded model: RoBERTa, ModernBERT
(tiny, random), and a Dream-style model whose logits at i predict token i+1."""

import pytest
import torch
import transformers

from unmask import decode
from unmask.models.auto import load_model
from unmask.models.hf import HFMaskedModel


def family(name, tok):
    v = len(tok)
    small = dict(vocab_size=v, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                 intermediate_size=32, pad_token_id=tok.pad_token_id)
    if name == "roberta":
        cfg = transformers.RobertaConfig(max_position_embeddings=66, **small)
        return transformers.RobertaForMaskedLM(cfg)
    cfg = transformers.ModernBertConfig(max_position_embeddings=64, global_attn_every_n_layers=1,
                                        bos_token_id=tok.bos_token_id,
                                        eos_token_id=tok.eos_token_id, sep_token_id=None,
                                        cls_token_id=None, **small)
    return transformers.ModernBertForMaskedLM(cfg)


@pytest.mark.parametrize("name", ["roberta", "modernbert"])
def test_masked_lm_family(name):
    import tiny_models

    tok = tiny_models.word_tokenizer()
    torch.manual_seed(0)
    hf = family(name, tok).eval()
    model = HFMaskedModel(hf, tok, max_length=32)
    assert model.mask_id == tok.mask_token_id
    ids = torch.tensor([tok("the cat sat on the mat")["input_ids"] + [model.mask_id] * 4])
    with torch.no_grad():
        want = hf(input_ids=ids, output_hidden_states=True)
        out = model(ids)
    assert torch.allclose(out.logits, want.logits.float(), atol=1e-5)
    assert torch.allclose(out.hidden, want.hidden_states[-1].float(), atol=1e-5)
    res = decode(model, ids, "eb", seed=0)
    assert bool(model.real_token_mask[res.tokens[0, 6:]].all())


def test_shifted_logits_read_position_i_from_i_minus_1(llada_dir):
    plain = load_model(llada_dir, trust_remote_code=True)
    shifted = HFMaskedModel(plain.hf, plain.tokenizer, shift_logits=True)
    x = torch.tensor([[1, 4, 5, 3, 3, 3]])
    with torch.no_grad():
        a, b = plain(x).logits, shifted(x).logits
    assert torch.equal(b[:, 1:], a[:, :-1]) and torch.equal(b[:, 0], a[:, 0])
