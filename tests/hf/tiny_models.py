"""Tiny randomly initialised Hugging Face checkpoints written into a folder, offline: a BERT
masked LM with a word-piece tokenizer, an ESM-C masked LM, and a LLaDA-style diffusion LM
whose modelling code sits in the folder (loaded with trust_remote_code from there only)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import torch

transformers = __import__("transformers")
tokenizers = __import__("tokenizers")

WORDS = ["the", "cat", "dog", "sat", "on", "mat", "a", "ran", ".", "hello", "world", "big",
         "red", "sun", "moon", "and"]

CONFIG_CODE = '''
from transformers import PretrainedConfig


class TinyLLaDAConfig(PretrainedConfig):
    model_type = "tinyllada"

    def __init__(self, vocab_size=24, hidden_size=32, num_hidden_layers=2, num_heads=2,
                 max_sequence_length=128, causal=False, suppress_ids=(), mask_token_id=3,
                 **kwargs):
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.num_hidden_layers = num_hidden_layers
        self.num_heads = num_heads
        self.max_sequence_length = max_sequence_length
        self.causal = causal
        self.suppress_ids = list(suppress_ids)
        self.mask_token_id = mask_token_id
        super().__init__(**kwargs)
'''

MODEL_CODE = '''
import torch
from torch import nn
from transformers import PreTrainedModel
from transformers.modeling_outputs import MaskedLMOutput

from .configuration_tinyllada import TinyLLaDAConfig


class Layer(nn.Module):
    def __init__(self, d, h):
        super().__init__()
        self.h = h
        self.qkv = nn.Linear(d, 3 * d)
        self.out = nn.Linear(d, d)
        self.ln1 = nn.LayerNorm(d)
        self.ln2 = nn.LayerNorm(d)
        self.ff = nn.Sequential(nn.Linear(d, 2 * d), nn.GELU(), nn.Linear(2 * d, d))

    def forward(self, x, allowed):
        b, n, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, n, 3, self.h, d // self.h).unbind(2)
        s = torch.einsum("bihd,bjhd->bhij", q, k) / (d // self.h) ** 0.5
        s = s.masked_fill(~allowed[:, None], float("-inf"))
        a = torch.einsum("bhij,bjhd->bihd", s.softmax(-1), v).reshape(b, n, d)
        x = x + self.out(a)
        return x + self.ff(self.ln2(x))


class TinyLLaDAModel(PreTrainedModel):
    """A LLaDA-style mask predictor: tokens -> logits, no time input; attention over the
    positions attention_mask keeps (bidirectional, or causal when config.causal)."""

    config_class = TinyLLaDAConfig

    def __init__(self, config):
        super().__init__(config)
        d = config.hidden_size
        self.tok = nn.Embedding(config.vocab_size, d)
        self.pos = nn.Embedding(config.max_sequence_length, d)
        self.layers = nn.ModuleList(Layer(d, config.num_heads)
                                    for _ in range(config.num_hidden_layers))
        self.norm = nn.LayerNorm(d)
        self.head = nn.Linear(d, config.vocab_size)
        self.post_init()

    def _init_weights(self, module):
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, std=0.5)

    def forward(self, input_ids, attention_mask=None, position_ids=None,
                output_hidden_states=None, **kwargs):
        b, n = input_ids.shape
        if position_ids is None:
            position_ids = torch.arange(n, device=input_ids.device)[None].expand(b, n)
        keep = (torch.ones(b, n, dtype=torch.bool, device=input_ids.device)
                if attention_mask is None else attention_mask.bool())
        allowed = keep[:, None, :].expand(b, n, n)
        if self.config.causal:
            allowed = allowed & torch.ones(n, n, dtype=torch.bool,
                                           device=input_ids.device).tril()[None]
        allowed = allowed | torch.eye(n, dtype=torch.bool, device=input_ids.device)[None]
        x = self.tok(input_ids) + self.pos(position_ids)
        states = [x]
        for layer in self.layers:
            x = layer(x, allowed)
            states.append(x)
        logits = self.head(self.norm(x))
        logits[..., list(self.config.suppress_ids)] = -1e9  # never predicted
        return MaskedLMOutput(logits=logits,
                              hidden_states=tuple(states) if output_hidden_states else None)
'''


def word_tokenizer(special=("<|pad|>", "<|bos|>", "<|eos|>", "<|mask|>"), mask=True):
    vocab = {w: i for i, w in enumerate(list(special) + WORDS)}
    tok = tokenizers.Tokenizer(tokenizers.models.WordLevel(vocab, unk_token=special[0]))
    tok.pre_tokenizer = tokenizers.pre_tokenizers.Whitespace()
    kwargs = dict(pad_token=special[0], bos_token=special[1], eos_token=special[2])
    if mask:
        kwargs["mask_token"] = special[3]
    return transformers.PreTrainedTokenizerFast(tokenizer_object=tok, **kwargs)


def write_llada(path: Path, *, causal=False, seed=0, mask=True, layers=2) -> Path:
    """A LLaDA-style folder: code + config (auto_map) + safetensors + tokenizer. Special ids
    other than EOS get a -1e9 logit (the model never predicts them)."""
    path.mkdir(parents=True, exist_ok=True)
    (path / "configuration_tinyllada.py").write_text(CONFIG_CODE)
    (path / "modeling_tinyllada.py").write_text(MODEL_CODE)
    (path / "__init__.py").write_text("")
    name = f"tinyllada_{abs(hash(str(path)))}"
    spec = importlib.util.spec_from_file_location(name, path / "__init__.py",
                                                  submodule_search_locations=[str(path)])
    pkg = importlib.util.module_from_spec(spec)
    sys.modules[name] = pkg
    cfg_mod = importlib.import_module(f"{name}.configuration_tinyllada")
    mod = importlib.import_module(f"{name}.modeling_tinyllada")
    tok = word_tokenizer(mask=mask)
    cfg = cfg_mod.TinyLLaDAConfig(vocab_size=len(tok), causal=causal, suppress_ids=[0, 1, 3],
                                  num_hidden_layers=layers,
                                  mask_token_id=3 if mask else None, eos_token_id=2,
                                  pad_token_id=0, bos_token_id=1)
    torch.manual_seed(seed)
    model = mod.TinyLLaDAModel(cfg).eval()
    model.save_pretrained(str(path))
    meta = json.loads((path / "config.json").read_text())
    meta["auto_map"] = {"AutoConfig": "configuration_tinyllada.TinyLLaDAConfig",
                        "AutoModel": "modeling_tinyllada.TinyLLaDAModel"}
    (path / "config.json").write_text(json.dumps(meta, indent=1))
    tok.save_pretrained(str(path))
    return path


def write_bert(path: Path, seed=0) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + WORDS
    (path / "vocab.txt").write_text("\n".join(vocab) + "\n")
    tok = transformers.BertTokenizer(str(path / "vocab.txt"))
    cfg = transformers.BertConfig(vocab_size=len(vocab), hidden_size=16, num_hidden_layers=2,
                                  num_attention_heads=2, intermediate_size=32,
                                  max_position_embeddings=64)
    torch.manual_seed(seed)
    transformers.BertForMaskedLM(cfg).eval().save_pretrained(str(path))
    tok.save_pretrained(str(path))
    return path


def write_esmc(path: Path, seed=0, max_positions=66) -> Path:
    if not hasattr(transformers, "EsmcConfig"):
        import pytest

        pytest.skip("ESM-C ships with transformers 5.x")
    cfg = transformers.EsmcConfig(vocab_size=64, hidden_size=16, intermediate_size=32,
                                  num_hidden_layers=2, num_attention_heads=2,
                                  max_position_embeddings=max_positions)
    torch.manual_seed(seed)
    transformers.EsmcForMaskedLM(cfg).eval().save_pretrained(str(path))
    return path
