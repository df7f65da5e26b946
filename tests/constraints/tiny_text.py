"""Tiny random text models with real tokenizers, built offline in well under a second:
a character tokenizer and a BPE trained on a small corpus (``tokenizers``), both decoding by
concatenation, and BERT's WordPiece (``transformers``)."""

from __future__ import annotations

import string
from pathlib import Path

import tokenizers
import torch
import transformers

from unmask.models import MDMTransformer, TransformerConfig

SPECIAL = ["[PAD]", "[MASK]", "[EOS]"]
CHARS = list(string.ascii_lowercase + string.digits + ' {}[]":,.-')
CORPUS = ['{"answer": 12}', '{"answer": -7, "label": "yes"}', "yes no maybe", "[1, 2, 3]",
          '{"name": "abc", "ok": true}', "the cat sat on the mat 42", "null false true"] * 20


def _fast(tok: tokenizers.Tokenizer) -> transformers.PreTrainedTokenizerFast:
    return transformers.PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="[PAD]",
                                                mask_token="[MASK]", eos_token="[EOS]")


def char_tokenizer():
    vocab = {t: i for i, t in enumerate(SPECIAL + CHARS)}
    tok = tokenizers.Tokenizer(tokenizers.models.BPE(vocab, [], unk_token=None))
    tok.decoder = tokenizers.decoders.Fuse()
    return _fast(tok)


def bpe_tokenizer(vocab_size: int = 90):
    tok = tokenizers.Tokenizer(tokenizers.models.BPE())
    tok.decoder = tokenizers.decoders.Fuse()
    trainer = tokenizers.trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIAL,
                                             initial_alphabet=CHARS, show_progress=False)
    tok.train_from_iterator(CORPUS, trainer)
    return _fast(tok)


def wordpiece_tokenizer(path: Path):
    words = ["yes", "no", "maybe", "the", "cat", "1", "2", "3", "{", "}", '"', ":", "a", "b",
             "##a", "##b", "##s", "##1", "##2", "##3", "answer", ","]
    path.mkdir(parents=True, exist_ok=True)
    (path / "vocab.txt").write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]",
                                               "[EOS]"] + words) + "\n")
    return transformers.BertTokenizer(str(path / "vocab.txt"), eos_token="[EOS]")


def text_model(tokenizer, *, eos: bool = True, seed: int = 0, max_length: int = 40,
               sharp: float = 3.0):
    """A random :class:`MDMTransformer` over ``tokenizer``'s ids with the tokenizer attached
    (its special ids never emitted; EOS emitted when ``eos``); ``sharp`` scales the logits
    (peaked, so that unconstrained outputs are rarely in a language)."""
    vocab = len(tokenizer)
    specials = set(tokenizer.all_special_ids)
    eos_id = tokenizer.convert_tokens_to_ids("[EOS]")
    mask_id = tokenizer.mask_token_id
    pad = tokenizer.pad_token_id  # a real id, as PAD is for the HF models
    real = [i for i in range(vocab) if i not in specials or i == pad or (eos and i == eos_id)]
    torch.manual_seed(seed)
    cfg = TransformerConfig(vocab_size=vocab, mask_id=mask_id, max_length=max_length,
                            d_model=16, n_layers=1, n_heads=2, d_ff=32, real_token_ids=real)
    model = MDMTransformer(cfg).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(sharp)
    model.tokenizer = tokenizer
    model.eos_ids = (eos_id,) if eos else ()
    model.pad_id = pad
    return model


def text_of(model, row: list[int], start: int = 0) -> str:
    """The decoded text of a row's positions from ``start``, up to the first EOS."""
    row = row[start:]
    cut = next((i for i, t in enumerate(row) if t in model.eos_ids), len(row))
    return model.tokenizer.decode(row[:cut], skip_special_tokens=True,
                                  clean_up_tokenization_spaces=False)
