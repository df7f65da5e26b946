"""unmask.generate and `unmask generate` against LLaDA's generate (written out here as the
reference) on a tiny LLaDA-style model whose code sits in its folder."""

import json
import shutil

import pytest
import torch
import torch.nn.functional as F

from unmask import UnmaskError
from unmask.cli import main
from unmask.generate import generate
from unmask.models.auto import load_model


def llada_reference(model, prompt, steps, gen_length, block_length, mask_id):
    """LLaDA's generate (arXiv:2502.09992, its reference code) at temperature 0 without
    classifier-free guidance: per block, a fixed number of tokens per step (the block's
    masks split evenly, remainder first), the most confident ones (low-confidence
    remasking). The model is the raw transformers module, called on the unpadded row."""
    x = torch.full((1, len(prompt) + gen_length), mask_id, dtype=torch.long)
    x[0, :len(prompt)] = torch.tensor(prompt)
    p_len = len(prompt)
    n_blocks = gen_length // block_length
    per_block = steps // n_blocks
    for nb in range(n_blocks):
        lo, hi = p_len + nb * block_length, p_len + (nb + 1) * block_length
        m = int((x[0, lo:hi] == mask_id).sum())
        counts = [m // per_block + (1 if i < m % per_block else 0) for i in range(per_block)]
        for i in range(per_block):
            mask_index = x == mask_id
            with torch.no_grad():
                logits = model(input_ids=x).logits
            x0 = logits.argmax(-1)
            p = F.softmax(logits.double(), dim=-1)
            x0_p = p.gather(-1, x0[..., None]).squeeze(-1)
            x0_p[:, hi:] = -float("inf")
            x0 = torch.where(mask_index, x0, x)
            conf = torch.where(mask_index, x0_p, -float("inf"))
            idx = torch.topk(conf[0], k=counts[i]).indices
            x[0, idx] = x0[0, idx]
    return x[0, p_len:].tolist()


PROMPTS = ["the cat sat", "hello world and the big red sun", "a dog"]


@pytest.mark.parametrize("gen_length, block_length, steps", [(8, 4, 4), (12, 4, 9), (8, 8, 8)])
def test_low_confidence_equals_llada_generate(llada_dir, gen_length, block_length, steps):
    model = load_model(llada_dir, trust_remote_code=True)
    tok = model.tokenizer
    out = generate(model, tok, PROMPTS, sampler="low_confidence", gen_length=gen_length,
                   block_length=block_length, steps=steps, stop_at_eos=False)
    for prompt, got in zip(PROMPTS, out, strict=True):
        want = llada_reference(model.hf, tok(prompt)["input_ids"], steps, gen_length,
                               block_length, model.mask_id)
        assert got.token_ids == want
        assert got.nfe == steps and got.tokens_per_forward == gen_length / steps


@pytest.mark.parametrize("spec, prompts, pad_to", [
    ("confidence", PROMPTS, None), ("eb:gamma=0.5", PROMPTS, None), ("margin", PROMPTS, None),
    ("threshold:tau=0.5", PROMPTS, None),
    # random draws are per absolute position: equal where the rows sit at one width (prompts
    # of 3 and 2 tokens in 4 slots)
    ("uniform:k=2", PROMPTS[::2], 4)])
def test_batched_equals_one_at_a_time(llada_dir, spec, prompts, pad_to):
    model = load_model(llada_dir, trust_remote_code=True)
    kw = dict(sampler=spec, gen_length=8, block_length=4, stop_at_eos=False,
              pad_to_multiple_of=pad_to)
    batch = generate(model, None, prompts, seed=5, **kw)
    for i, p in enumerate(prompts):
        (alone,) = generate(model, None, p, seed=5 + i, **kw)
        assert alone.token_ids == batch[i].token_ids and alone.nfe == batch[i].nfe


def test_a_block_of_only_eos_ends_the_row(tmp_path):
    import tiny_models

    model = load_model(tiny_models.write_llada(tmp_path / "eos", layers=1),
                       trust_remote_code=True)
    with torch.no_grad():
        model.hf.head.bias[2] += 50.0  # every position now predicts EOS
    (r,) = generate(model, None, "the cat", gen_length=16, block_length=4, steps=16)
    assert r.token_ids == [2] * 16 and r.text == ""
    assert r.nfe == 4 + 3  # the first block by the schedule, then one pass per block
    (full,) = generate(model, None, "the cat", gen_length=16, block_length=4, steps=16,
                       stop_at_eos=False)
    assert full.nfe == 16


def _eos_model(path, eos_bias):
    import tiny_models

    model = load_model(tiny_models.write_llada(path, layers=1), trust_remote_code=True)
    with torch.no_grad():
        model.hf.head.bias[2] += eos_bias
    return model


EOS_SPECS = ["confidence", "eb:gamma=0.5", "threshold:tau=0.9", "margin",
             "eb:gamma=1.0,order=confidence+verify=0.002", "info-gain"]


@pytest.mark.parametrize("spec", EOS_SPECS)
def test_min_new_tokens_keeps_eos_out_of_the_first_positions(tmp_path, spec):
    model = _eos_model(tmp_path / "eos", 50.0)  # every position predicts EOS
    prompts = ["the cat", "a dog ran on the mat"]  # padded to 8 slots: generation starts at 8
    out = generate(model, None, prompts, sampler=spec, gen_length=16, block_length=4,
                   min_new_tokens=6)
    for r in out:
        assert 2 not in r.token_ids[:6] and r.token_ids[6:] == [2] * 10
        assert len(r.text.split()) == 6
    (plain,) = generate(model, None, "the cat", sampler=spec, gen_length=16, block_length=4)
    assert plain.token_ids == [2] * 16 and plain.text == ""


@pytest.mark.parametrize("spec", EOS_SPECS[:4])
def test_min_new_tokens_decodes_as_the_model_without_eos(tmp_path, spec):
    """Over gen_length = min_new_tokens positions, banning EOS is decoding a model whose EOS
    logit is -1e9: same tokens, same passes (for samplers that read only the loop's pass;
    verified and lookahead samplers judge the states they evaluate with the model as is)."""
    keen = _eos_model(tmp_path / "keen", 3.0)
    never = _eos_model(tmp_path / "never", -1e9)
    prompts = ["the cat", "hello world and the big red sun"]
    got = generate(keen, None, prompts, sampler=spec, gen_length=8, block_length=4,
                   min_new_tokens=8)
    want = generate(never, None, prompts, sampler=spec, gen_length=8, block_length=4)
    assert [g.token_ids for g in got] == [w.token_ids for w in want]
    assert [g.nfe for g in got] == [w.nfe for w in want]
    assert all(2 not in g.token_ids for g in got)
    free = generate(keen, None, prompts, sampler=spec, gen_length=8, block_length=4)
    assert any(2 in f.token_ids for f in free)  # without the ban the model does emit EOS


def test_min_new_tokens_refusals(llada_dir, capsys):
    model = load_model(llada_dir, trust_remote_code=True)
    for bad in (9, -1, 2.5, True):
        with pytest.raises(UnmaskError, match=r"min_new_tokens: must be an integer in "
                                              r"\[0, gen_length 8\]"):
            generate(model, None, "a", gen_length=8, min_new_tokens=bad)
    assert main(["generate", "--model", str(llada_dir), "--trust-remote-code", "--prompt", "a",
                 "--gen-length", "8", "--min-new-tokens", "9"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: --min-new-tokens:") and "\n" not in err, err
    assert main(["generate", "--model", str(llada_dir), "--trust-remote-code", "--prompt",
                 "the cat", "--gen-length", "8", "--min-new-tokens", "8", "--json"]) == 0
    (line,) = capsys.readouterr().out.splitlines()
    assert len(json.loads(line)["text"].split()) == 8


def test_bad_generate_arguments(llada_dir):
    model = load_model(llada_dir, trust_remote_code=True)
    with pytest.raises(UnmaskError, match="block_length: 3 does not divide gen_length 8"):
        generate(model, None, "a", gen_length=8, block_length=3)
    with pytest.raises(UnmaskError, match="prompt 0: .* exceed the model's max_length 128"):
        generate(model, None, "a " * 130, gen_length=8)
    with pytest.raises(UnmaskError, match="steps: 5 is not a multiple of the 2 blocks"):
        generate(model, None, "a", gen_length=8, block_length=4, steps=5)
    with pytest.raises(UnmaskError, match="sampler 'eb' chooses how many"):
        generate(model, None, "a", gen_length=8, sampler="eb", steps=8)
    with pytest.raises(UnmaskError, match="sampler: unknown name 'nope'"):
        generate(model, None, "a", gen_length=8, sampler="nope")


def test_cli_json_and_one_line_refusals(llada_dir, bert_dir, tmp_path, capsys):
    prompts = tmp_path / "p.jsonl"
    prompts.write_text('"the cat"\n{"prompt": "a dog ran"}\n\n')
    assert main(["generate", "--model", str(llada_dir), "--trust-remote-code", "--file",
                 str(prompts), "--gen-length", "8", "--block-length", "4", "--json"]) == 0
    lines = [json.loads(s) for s in capsys.readouterr().out.splitlines()]
    assert [d["prompt"] for d in lines] == ["the cat", "a dog ran"]
    assert all(d["nfe"] >= 1 and d["tokens_per_forward"] == 8 / d["nfe"] for d in lines)
    assert main(["generate", "--model", str(bert_dir), "--prompt", "the cat", "--gen-length",
                 "4", "--sampler", "low_confidence", "--steps", "2"]) == 0
    assert "[nfe 2, 2.00 tokens/forward" in capsys.readouterr().out

    no_tok = tmp_path / "notok"
    shutil.copytree(bert_dir, no_tok)
    for f in ("tokenizer.json", "tokenizer_config.json", "vocab.txt"):
        (no_tok / f).unlink(missing_ok=True)
    no_w = tmp_path / "now"
    shutil.copytree(bert_dir, no_w)
    (no_w / "model.safetensors").unlink()
    code_gone = tmp_path / "gone"
    shutil.copytree(llada_dir, code_gone)
    (code_gone / "modeling_tinyllada.py").unlink()
    bad = {
        "has no weights": ["--model", str(no_w), "--prompt", "a"],
        "has no tokenizer": ["--model", str(no_tok),
                                                                "--prompt", "a"],
        "exceed the model's max_length 64": ["--model", str(bert_dir), "--prompt", "a " * 70],
        "does not divide gen_length": ["--model", str(bert_dir), "--prompt", "a",
                                       "--gen-length", "8", "--block-length", "3"],
        "runs its own modelling code": ["--model", str(llada_dir), "--prompt", "a"],
        "modeling_tinyllada.py that is not in the folder": ["--model", str(code_gone),
                                                            "--trust-remote-code",
                                                            "--prompt", "a"],
        "is not a folder": ["--model", str(tmp_path / "missing"), "--prompt", "a"],
        "is a sudoku model, not a text model": ["--model", "sudoku", "--prompt", "a"],
        "--file: line 1 is not JSON": ["--model", str(bert_dir), "--file", str(no_tok /
                                                                            "config.json")],
    }
    for message, argv in bad.items():
        assert main(["generate", *argv]) == 2, message
        err = capsys.readouterr().err.strip()
        assert err.startswith("error: ") and message in err and "\n" not in err, err


def test_no_mask_token_cli(tmp_path, capsys):
    import tiny_models

    path = tiny_models.write_llada(tmp_path / "nomask", mask=False, layers=1)
    assert main(["generate", "--model", str(path), "--trust-remote-code", "--prompt", "a"]) == 2
    assert "has no mask token" in capsys.readouterr().err


@pytest.mark.parametrize("spec", ["confidence", "uniform:k=2"])
def test_batch_invariant_rows_of_other_widths_run_as_they_do_alone(llada_dir, spec):
    """Prompts filling 1 and 2 blocks, batch_invariant: each run of rows of one width is a
    call of its own, so every model pass sees a row exactly as the row decoded alone (no
    extra padding: another shape, other roundings in bf16) and the random draws, per
    absolute position, are the row's own."""
    model = load_model(llada_dir, trust_remote_code=True)
    seen = []
    hook = model.hf.register_forward_pre_hook(
        lambda m, a, kw: seen.append(tuple(map(tuple, kw["input_ids"].tolist()))),
        with_kwargs=True)
    kw = dict(sampler=spec, gen_length=8, block_length=4, stop_at_eos=False)
    try:
        batch = generate(model, None, PROMPTS, seed=5, batch_invariant=True, **kw)
        in_batch, seen[:] = set(seen), []
        alone = [generate(model, None, p, seed=5 + i, **kw)[0] for i, p in enumerate(PROMPTS)]
    finally:
        hook.remove()
    assert {len(rows) for rows in in_batch} == {1} and in_batch == set(seen)
    for got, want in zip(batch, alone, strict=True):
        assert got.token_ids == want.token_ids and got.nfe == want.nfe


def test_a_row_is_the_prompt_then_the_masks(llada_dir):
    """No padding at batch 1: every pass runs the prompt's 3 tokens and the 8 masks (the
    loop counts its blocks back from the row's end), as LLaDA's ``generate`` lays them out;
    ``pad_to_multiple_of`` puts the prompt in 4 slots, left out of attention, for the same
    greedy tokens."""
    model = load_model(llada_dir, trust_remote_code=True)
    widths = []
    hook = model.hf.register_forward_pre_hook(
        lambda m, a, kw: widths.append(kw["input_ids"].shape[1]), with_kwargs=True)
    kw = dict(sampler="confidence", gen_length=8, block_length=4, stop_at_eos=False)
    try:
        (exact,) = generate(model, None, "the cat sat", **kw)
        assert set(widths) == {3 + 8} and len(widths) == exact.nfe == 8
        widths.clear()
        (padded,) = generate(model, None, "the cat sat", pad_to_multiple_of=4, **kw)
        assert set(widths) == {4 + 8}
    finally:
        hook.remove()
    assert padded.token_ids == exact.token_ids
    want = llada_reference(model.hf, model.tokenizer("the cat sat")["input_ids"], 8, 8, 4,
                           model.mask_id)
    assert exact.token_ids == want


def test_a_model_without_pad_takes_prompts_of_any_length_one_at_a_time(llada_dir):
    model = load_model(llada_dir, trust_remote_code=True)
    kw = dict(sampler="confidence", gen_length=8, block_length=4, stop_at_eos=False)
    want = [g.token_ids for g in generate(model, None, PROMPTS, **kw)]
    model.pad_id = None
    assert [g.token_ids for g in generate(model, None, PROMPTS, batch_size=1, **kw)] == want
    with pytest.raises(UnmaskError, match="model: it has no pad token to put prompts of "
                                          "different lengths in one batch; give batch_size=1"):
        generate(model, None, PROMPTS, **kw)
    with pytest.raises(UnmaskError, match="pad_to_multiple_of: must be None or an integer >= 1"):
        generate(model, None, "a", pad_to_multiple_of=0)


def test_cli_pad_to_multiple_of_is_the_apis(llada_dir, capsys):
    from unmask.cli import main

    argv = ["generate", "--model", str(llada_dir), "--trust-remote-code", "--prompt",
            "the cat sat", "--gen-length", "8", "--block-length", "4", "--temperature", "1",
            "--seed", "3", "--json", "--sampler", "uniform:k=2", "--pad-to-multiple-of", "8"]
    assert main(argv) == 0
    got = json.loads(capsys.readouterr().out)["text"]
    model = load_model(llada_dir, trust_remote_code=True)
    kw = dict(sampler="uniform:k=2", gen_length=8, block_length=4, temperature=1.0, seed=3)
    (want,) = generate(model, None, "the cat sat", pad_to_multiple_of=8, **kw)
    assert got == want.text
    assert got != generate(model, None, "the cat sat", **kw)[0].text  # 3 slots draw otherwise
    assert main([*argv[:-1], "0"]) == 2
    assert "--pad-to-multiple-of" in capsys.readouterr().err


@pytest.mark.parametrize("prompts", [["the cat sat"], ["the cat sat", "the cat sat"],
                                     ["the cat", "a dog ran on the mat"]],
                         ids=["one row", "no padding", "padded"])
def test_a_pass_reads_the_host_once(llada_dir, prompts):
    """Without a KV cache, the model reads nothing back a pass: whether rows hold padding is
    read once per decode (only real tokens are written, never the pad), so a pass makes the
    loop's one read (on a GPU, one synchronisation); passes are told apart by their
    number, at the same blocks (a pass that enters a block reads which)."""
    from unmask.host_reads import as_on_accelerators, count_host_reads

    model = load_model(llada_dir, trust_remote_code=True)
    reads, passes = [], []
    for steps in (4, 8):
        with as_on_accelerators(), count_host_reads(sites=True) as counted:
            out = generate(model, None, prompts, sampler="low_confidence", steps=steps,
                           gen_length=8, block_length=4, stop_at_eos=False)
        reads.append(counted.total)
        passes.append(out[0].nfe)
        assert not [site for site in counted.by_site if site.endswith(" forward")]
    assert passes == [4, 8]
    assert reads[1] - reads[0] == passes[1] - passes[0]


def test_rows_that_finish_apart_read_no_padding(llada_dir, monkeypatch):
    """A padded batch whose rows finish at different passes: the loop follows its rows on
    the host (their padding read once, then cut by the pass's one read), so no call reads
    whether its rows hold padding, and every row decodes as when each call read it."""
    from unmask.host_reads import as_on_accelerators, count_host_reads
    from unmask.models.hf import HFMaskedModel

    model = load_model(llada_dir, trust_remote_code=True)
    prompts = ["the cat", "a dog ran on the mat", "hello world and the big red sun"]
    kw = dict(sampler="eb:gamma=0.5", gen_length=12, block_length=4, stop_at_eos=False, seed=3)
    with as_on_accelerators(), count_host_reads(sites=True) as counted:
        out = generate(model, None, prompts, **kw)
    assert len({g.nfe for g in out}) > 1  # rows finish apart
    assert not [site for site in counted.by_site if site.endswith(" forward")]
    monkeypatch.setattr(HFMaskedModel, "supports_padded", property(lambda self: False))
    with count_host_reads(sites=True) as counted:
        want = generate(model, None, prompts, **kw)
    assert [site for site in counted.by_site if site.endswith(" forward")]  # each call read
    assert [g.token_ids for g in out] == [g.token_ids for g in want]
    assert [g.nfe for g in out] == [g.nfe for g in want]
