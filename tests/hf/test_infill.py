"""unmask.infill and `unmask infill` on text models (tiny BERT and LLaDA-style folders):
template syntax, given context kept, the one path shared with generate, and the CLI."""

import json

import pytest
import torch

from unmask import UnmaskError, generate, infill
from unmask.cli import main
from unmask.infill import encode_text, split_template
from unmask.models.auto import load_model


@pytest.fixture(scope="module")
def bert(bert_dir):
    torch.set_num_threads(1)
    return load_model(bert_dir)


@pytest.fixture(scope="module")
def llada(llada_dir):
    return load_model(llada_dir, trust_remote_code=True)


def test_split_template():
    assert split_template("ab<mask>c<mask:3><mask>") == ["ab", 1, "c", 3, 1]
    assert split_template("<mask:12>") == [12]
    assert split_template("no masks") == ["no masks"]
    for bad in ("<mask:0>", "<mask:x>", "<mask:-2>", "<mask:>"):
        with pytest.raises(UnmaskError, match=r"template 4: .* integer >= 1"):
            split_template(f"a{bad}", 4)


def test_mask_marks_and_the_models_own_token_encode_alike(bert):
    tok = bert.tokenizer
    want = tok("the [MASK] [MASK] [MASK] sat [MASK]")["input_ids"]
    assert encode_text(tok, "the <mask:3> sat <mask>") == want
    assert encode_text(tok, "the [MASK]<mask:2> sat [MASK]") == want
    assert want.count(bert.mask_id) == 4


def test_given_context_is_kept_and_every_mask_filled(bert):
    templates = ["the <mask:2> sat on the mat", "<mask> dog ran", "a big [MASK] sun <mask>"]
    out = infill(bert, templates, sampler="topk:k=2", batch_size=2)
    for t, g in zip(templates, out, strict=True):
        ids = encode_text(bert.tokenizer, t)
        assert len(g.token_ids) == len(ids) and bert.mask_id not in g.token_ids
        given = [i != bert.mask_id for i in ids]
        assert [a for a, k in zip(g.token_ids, given, strict=True) if k] == [
            a for a, k in zip(ids, given, strict=True) if k]
        assert all(a in bert.real_token_ids for a, k in zip(g.token_ids, given, strict=True)
                   if not k)
        assert g.text == bert.tokenizer.decode(g.token_ids, skip_special_tokens=True)
        masked = ids.count(bert.mask_id)
        assert g.tokens_per_forward == pytest.approx(masked / g.nfe)
    # topk:k=2 takes ceil(masks / 2) passes
    assert [g.nfe for g in out] == [1, 1, 1]


def test_batching_and_padding_change_nothing(bert):
    # at temperature 0 (the token draw's noise depends on the row's width)
    templates = ["the <mask:3> sat on the mat .", "<mask> dog", "hello <mask:2> world"]
    together = infill(bert, templates, sampler="eb:gamma=0.5")
    alone = [infill(bert, t, sampler="eb:gamma=0.5")[0] for t in templates]
    assert [g.token_ids for g in together] == [g.token_ids for g in alone]
    assert [g.nfe for g in together] == [g.nfe for g in alone]


@pytest.mark.parametrize("sampler", ["confidence", "topk:k=3", "eb:gamma=0.1",
                                     "threshold:tau=0.3", "margin", "entropy", "dus"])
@pytest.mark.parametrize("block,temperature", [(4, 1.0), (8, 1.0), (8, 0.0)])
def test_infill_of_a_trailing_run_is_generate(llada, sampler, block, temperature):
    # the shared path: "prompt<mask:G>" filled is generate(prompt, G) with EOS kept out of
    # the G positions, block by block, token for token and pass for pass (with blocks the
    # rows are laid out alike, so even the sampled draws agree)
    prompts = ["the cat sat", "a big red dog ran on"]
    kw = dict(sampler=sampler, block_length=block, temperature=temperature, seed=3)
    filled = infill(llada, [p + "<mask:8>" for p in prompts], **kw)
    made = generate(llada, None, prompts, gen_length=8, min_new_tokens=8, **kw)
    for f, g in zip(filled, made, strict=True):
        assert f.token_ids[-8:] == g.token_ids
        assert (f.nfe, f.sequences) == (g.nfe, g.sequences)
        assert f.cumulative_entropy == pytest.approx(g.cumulative_entropy, rel=1e-4)
        assert llada.eos_ids[0] not in f.token_ids


def test_steps_and_blocks(llada):
    # steps are per block holding masks: two blocks of 4 masks, 2 steps each
    out = infill(llada, "the cat<mask:8>", sampler="confidence", block_length=4, steps=2)
    assert out[0].nfe == 4
    with pytest.raises(UnmaskError, match="steps"):
        infill(llada, "the cat<mask:8>", sampler="eb:gamma=0.1", steps=2)


def test_generate_refuses_a_mask_token_inside_a_prompt(bert, capsys, bert_dir):
    with pytest.raises(UnmaskError, match=r"prompt 1: holds the model's mask token '\[MASK\]'"):
        generate(bert, None, ["the cat", "the [MASK] sat"], gen_length=4)
    rc = main(["generate", "--model", str(bert_dir), "--prompt", "a [MASK] b",
               "--gen-length", "4"])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and "infill" in err


def test_refusals(bert, llada):
    cases = {
        "holds no <mask>": (bert, ["the cat"]),
        "exceed the model's max_length 64": (bert, ["the " * 70 + "<mask>"]),
        r"reads part of it as \[UNK\].*'zebra'": (bert, ["the zebra <mask>"]),
        "expected a string": (bert, ["<mask>", 3]),
        "non-empty list": (bert, []),
    }
    for message, (model, templates) in cases.items():
        with pytest.raises(UnmaskError, match=message):
            infill(model, templates)
    with pytest.raises(UnmaskError, match="block_length"):
        infill(bert, ["<mask>"], block_length=0)


def test_cli_json_and_file(bert_dir, tmp_path, capsys):
    f = tmp_path / "t.txt"
    f.write_text('the <mask> sat\n\n"<mask:2> ran"\n{"template": "a [MASK] dog"}\n')
    assert main(["infill", "--model", str(bert_dir), "--file", str(f), "--json",
                 "--sampler", "topk:k=2", "--threads", "1"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["template"] for r in rows] == ["the <mask> sat", "<mask:2> ran", "a [MASK] dog"]
    assert set(rows[0]) == {"template", "text", "nfe", "sequences", "tokens_per_forward",
                            "cumulative_entropy", "wall_s"}
    assert [r["nfe"] for r in rows] == [1, 1, 1]
    # spacing around punctuation is the tokenizer's (transformers 4.x's WordPiece decoder
    # joins "the ." as "the."); the given words are kept either way
    text = rows[0]["text"].replace(" ", "")
    assert text.startswith("the") and text.endswith("sat")


@pytest.mark.parametrize("argv,message", [
    (["--template", "the cat"], "holds no <mask>"),
    (["--template", "<mask:0>"], "integer >= 1"),
    (["--template", "<mask>", "--block-length", "0"], "block-length"),
    (["--file", "/nonexistent/t.txt"], "cannot read"),
    (["--template", "<mask>", "--sampler", "nope"], "nope"),
])
def test_cli_refusals_are_one_line(bert_dir, capsys, argv, message):
    assert main(["infill", "--model", str(bert_dir), *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error:") and message in err and err.count("\n") == 1


def test_python_api_refusals_are_unmask_errors(bert):
    for kwargs, field in [({"block_length": True}, "block_length"), ({"batch_size": 1.5},
                          "batch_size"), ({"seed": "3"}, "seed"), ({"steps": 0}, "steps")]:
        with pytest.raises(UnmaskError, match=field):
            infill(bert, "the <mask> sat", **kwargs)
    with pytest.raises(UnmaskError, match="model: expected a MaskedModel"):
        infill(42, "the <mask> sat")
