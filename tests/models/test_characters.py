"""One character tokenizer builder (unmask.models.characters) under the text MDM's and the
converted AntiBERTy's tokenizers."""

import pytest

pytest.importorskip("transformers")

from transformers import PreTrainedTokenizerFast  # noqa: E402

from unmask.models.antiberty import residue_tokenizer  # noqa: E402
from unmask.models.characters import character_tokenizer  # noqa: E402
from unmask.pretrained import pretrained_path  # noqa: E402
from unmask.reasoning.tokenizer import CHARACTERS, SPECIAL, char_tokenizer  # noqa: E402


def test_the_text_tokenizer_is_the_shipped_one():
    shipped = PreTrainedTokenizerFast.from_pretrained(str(pretrained_path("text")))
    ours = char_tokenizer(shipped.model_max_length)
    text = "Q: 12 + 30 =\n A: 42 ~ é"
    assert ours(text)["input_ids"] == shipped(text)["input_ids"]
    assert ours.get_vocab() == shipped.get_vocab()
    assert (ours.eos_token, ours.padding_side) == ("[EOS]", "left")


def test_one_id_per_character_and_unknowns_are_unk():
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "A", "C", " "]
    tok = character_tokenizer(vocab, 16)
    assert tok("AC A")["input_ids"] == [2, 5, 6, 7, 5, 3]
    assert tok("AZ")["input_ids"] == [2, 5, 1, 3]
    assert tok.decode(tok("CA A")["input_ids"], skip_special_tokens=True) == "CA A"
    res = residue_tokenizer(vocab, 16)
    assert res.backend_tokenizer.to_str() == tok.backend_tokenizer.to_str()
    assert len(char_tokenizer().get_vocab()) == len(SPECIAL) + len(CHARACTERS)
