"""unmask.generate against the reference generation code of LLaDA, Fast-dLLM and Dream, token
for token, on tiny random LLaDA and Dream checkpoints built from those models' own code
(``../shared/external/fast-dllm``; skipped when absent).

Every comparison is greedy (temperature 0): the references draw random numbers their own
way, so only the argmax path is comparable. What cannot be compared, and why:

- Fast-dLLM's factor rule: the reference commit's ``generate.py`` has the threshold rule
  only (``threshold=``); unmask's ``factor`` sampler is tested against the paper's rule in
  tests/samplers.
- Dream's ``diffusion_generate`` reveals ``int(M * (1 - s/t))`` positions per step on a
  float32 ``linspace(1, eps, steps + 1)``: rounding gives passes that reveal nothing (e.g.
  gen_length 8, steps 8: 1, 0, 1, ...), which a decode loop that reveals at least one
  position per pass cannot reproduce. Its counts equal unmask's linear schedule for
  ``eps = 0`` and steps 1 or 2 (checked below), so the rankings are compared there.
"""

import json

import pytest
import torch
from dllm_models import dream_counts, fastdllm_generate, require_external, write_dream, write_llada

from unmask.generate import generate
from unmask.models.auto import load_model

# LLaDA's code wraps its attention in torch.compile: compiling every new shape on a CPU
# costs seconds, so these tests run it eagerly (conftest)
pytestmark = pytest.mark.usefixtures("eager_attention")

#: prompts of the word-level tokenizer: 8 tokens (whole blocks of 8) and 5 (the first block
#: starts mid-row)
PROMPTS = ["w5 w17 w33 w8 w40 w12 w61 w9", "w70 w3 w28 w44 w19"]


@pytest.fixture(scope="module")
def llada(tmp_path_factory):
    require_external()
    return load_model(write_llada(tmp_path_factory.mktemp("llada") / "m"),
                      trust_remote_code=True)


@pytest.fixture(scope="module")
def dream(tmp_path_factory):
    require_external()
    return load_model(write_dream(tmp_path_factory.mktemp("dream") / "m"),
                      trust_remote_code=True)


def _ids(model, prompt):
    return torch.tensor([model.tokenizer(prompt)["input_ids"]])


def _reference(fn, model, prompt, **kw):
    x, nfe = fn(model.hf, _ids(model, prompt), temperature=0.0, mask_id=model.mask_id, **kw)
    return x[0, _ids(model, prompt).shape[1]:].tolist(), nfe


@pytest.mark.parametrize("prompt", PROMPTS)
@pytest.mark.parametrize("gen_length, block_length, steps", [
    (16, 16, 8),   # one block
    (16, 8, 8),    # semi-autoregressive blocks
    (24, 8, 12),   # blocks, several tokens per step
    (16, 4, 16),   # one token per step
])
def test_llada_low_confidence_equals_generate(llada, prompt, gen_length, block_length, steps):
    ref = fastdllm_generate()
    want, nfe = _reference(ref.generate, llada, prompt, steps=steps, gen_length=gen_length,
                           block_length=block_length, remasking="low_confidence")
    (got,) = generate(llada, None, prompt, sampler="low_confidence", gen_length=gen_length,
                      block_length=block_length, steps=steps, stop_at_eos=False)
    assert got.token_ids == want
    assert got.nfe == nfe == steps


@pytest.mark.parametrize("prompt", PROMPTS)
@pytest.mark.parametrize("tau, gen_length, block_length", [
    (0.9, 16, 8), (0.7, 16, 16), (0.5, 24, 8)])
def test_fastdllm_threshold_equals_generate(llada, prompt, tau, gen_length, block_length):
    """Fast-dLLM's threshold rule (``generate(..., threshold=tau)``): per pass, the most
    confident masked position of the block and every other one with p(x0) >= tau."""
    ref = fastdllm_generate()
    want, nfe = _reference(ref.generate, llada, prompt, steps=gen_length // block_length,
                           gen_length=gen_length, block_length=block_length, threshold=tau)
    (got,) = generate(llada, None, prompt, sampler=f"threshold:tau={tau}",
                      gen_length=gen_length, block_length=block_length, stop_at_eos=False)
    assert got.token_ids == want
    assert got.nfe == nfe and gen_length // block_length <= nfe <= gen_length


def test_dream_schedule_matches_linear_only_where_compared():
    """Where the comparison below runs, Dream's per-step counts are unmask's linear ones;
    with more steps they are not (passes that reveal nothing)."""
    for gen_length in (8, 16):
        assert dream_counts(gen_length, 2, 0.0) == [gen_length // 2] * 2
        assert dream_counts(gen_length, 1, 0.0) == [gen_length]
    assert 0 in dream_counts(8, 8, 0.0) and 0 in dream_counts(16, 16, 1e-3)


@pytest.mark.parametrize("prompt", PROMPTS)
@pytest.mark.parametrize("alg, sampler", [
    ("maskgit_plus", "confidence"), ("topk_margin", "margin"), ("entropy", "entropy")])
@pytest.mark.parametrize("gen_length", [8, 16])
def test_dream_equals_diffusion_generate(dream, prompt, alg, sampler, gen_length, capsys):
    """Dream's ``diffusion_generate`` (logits shifted by one: position i reads the logits
    at i - 1) with its three ranking algorithms, 2 steps, eps 0."""
    ids = _ids(dream, prompt)
    with torch.no_grad():
        # the folder's DreamGenerationConfig given explicitly: without one, Dream derives it
        # with GenerationConfig.from_model_config, which under transformers 5 compares
        # Dream's extra fields (eps, alg, ...) with a base config that lacks them
        out = dream.hf.diffusion_generate(ids, dream.hf.generation_config,
                                          max_new_tokens=gen_length, steps=2, alg=alg,
                                          temperature=0.0, eps=0.0)
    capsys.readouterr()  # the reference prints its step count and time
    want = out[0, ids.shape[1]:].tolist()
    (got,) = generate(dream, None, prompt, sampler=sampler, gen_length=gen_length, steps=2,
                      stop_at_eos=False)
    assert got.token_ids == want and got.nfe == 2


#: prompts of 3, 5, 8 and 11 tokens: one batch pads them to 16 slots (whole blocks of 8)
RAGGED = ["w5 w17 w33", "w70 w3 w28 w44 w19", PROMPTS[0], "w9 w8 w7 w6 w5 w4 w3 w11 w12 w13 w14"]


@pytest.mark.parametrize("family", ["llada", "dream"])
def test_padded_row_gives_the_logits_of_the_row_alone(family, request):
    """Left padding is left out of attention (LLaDA's code drops its attention_mask before
    the attention; unmask passes it through) and rotary positions make the offset cancel."""
    model = request.getfixturevalue(family)
    row = torch.tensor([[5, 17, 33, model.mask_id, model.mask_id, 2]])
    padded = torch.cat([torch.full((1, 4), model.pad_id), row], 1)
    with torch.no_grad():
        alone, both = model(row).logits, model(torch.cat([padded, torch.cat(
            [row, row[:, :4]], 1)])).logits
    # Dream's logits are shifted: position 0 reads the pad before it (a prompt's first
    # token is never decoded)
    first = 1 if family == "dream" else 0
    torch.testing.assert_close(both[0, 4 + first:], alone[0, first:], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("family, sampler, block_length, steps, cache", [
    ("llada", "confidence", 8, 8, None), ("llada", "threshold:tau=0.7", 8, None, None),
    ("dream", "entropy", 16, 2, None), ("dream", "margin", 8, 4, None),
    # rows in different blocks run as separate cached windows
    ("llada", "threshold:tau=0.7", 8, None, "prefix"), ("llada", "confidence", 4, 8, "dual")])
def test_ragged_batch_equals_each_prompt_alone(family, sampler, block_length, steps, cache,
                                               request):
    model = request.getfixturevalue(family)
    kw = dict(sampler=sampler, gen_length=16, block_length=block_length, steps=steps,
              stop_at_eos=False, cache_kv=cache)
    batch = generate(model, None, RAGGED, **kw)
    for prompt, got in zip(RAGGED, batch, strict=True):
        (alone,) = generate(model, None, prompt, **kw)
        assert got.token_ids == alone.token_ids and got.nfe == alone.nfe


@pytest.mark.parametrize("cache", [None, "prefix"])
def test_a_ragged_batch_reads_nothing_in_the_models_code(llada, cache):
    """The padding of a ragged batch reaches LLaDA's attention without its attention_mask
    argument, whose handling there reads the host (a synchronisation a pass on a GPU) for a
    bias the attention never uses: no read in the model's code nor in unmask's hook on it
    (the rows equal each prompt alone: the test above)."""
    from unmask.host_reads import as_on_accelerators, count_host_reads

    kw = dict(sampler="threshold:tau=0.7", gen_length=16, block_length=8, stop_at_eos=False,
              cache_kv=cache)
    with as_on_accelerators(), count_host_reads(sites=True) as reads:
        generate(llada, None, RAGGED, **kw)
    assert reads.total
    assert not [site for site in reads.by_site if "modeling_llada" in site
                or "hf_compat" in site]


@pytest.mark.parametrize("prompt", PROMPTS)
@pytest.mark.parametrize("cache", ["prefix", "dual"])
@pytest.mark.parametrize("sampler, per_block, tau", [
    ("low_confidence", 4, None), ("threshold:tau=0.7", None, 0.7),
    ("threshold:tau=0.9", None, 0.9)])
@pytest.mark.parametrize("gen_length, block_length", [(16, 8), (24, 8), (16, 16)])
def test_fastdllm_cache_equals_generate_with_cache(llada, prompt, cache, sampler, per_block,
                                                   tau, gen_length, block_length):
    """Fast-dLLM's ``generate_with_prefix_cache`` / ``generate_with_dual_cache`` against
    ``cache_kv="prefix"`` / ``"dual"``: tokens and forward passes. The references run one
    more pass in a block that their first pass completed (a pass that reveals nothing), so
    with the threshold rule they may count up to one pass more per block."""
    ref = fastdllm_generate()
    fn = {"prefix": ref.generate_with_prefix_cache, "dual": ref.generate_with_dual_cache}[cache]
    n_blocks = gen_length // block_length
    steps = n_blocks * (per_block or 1)
    want, nfe = _reference(fn, llada, prompt, steps=steps, gen_length=gen_length,
                           block_length=block_length, threshold=tau)
    (got,) = generate(llada, None, prompt, sampler=sampler, gen_length=gen_length,
                      block_length=block_length, steps=steps if per_block else None,
                      stop_at_eos=False, cache_kv=cache)
    assert got.token_ids == want
    if per_block:  # no block is done in one pass
        assert got.nfe == nfe == steps
    else:
        assert got.nfe <= nfe <= got.nfe + n_blocks


def test_cache_refusals_are_one_line(llada, dream, bert_dir, capsys):
    from unmask import UnmaskError
    from unmask.cli import main
    from unmask.decode import DecodeConfig

    with pytest.raises(UnmaskError, match="cache_kv: expected None or one of prefix, dual"):
        DecodeConfig(cache_kv="full")
    with pytest.raises(UnmaskError, match="not supported for models with shifted logits"):
        generate(dream, None, "w5", gen_length=8, cache_kv="prefix")
    from unmask.samplers.confidence import ConfidenceSampler

    class EveryLayer(ConfidenceSampler):
        needs_hidden_layers = True

    with pytest.raises(UnmaskError, match="reads every layer's hidden states"):
        generate(llada, None, "w5", gen_length=8, sampler=EveryLayer(), cache_kv="dual",
                 stop_at_eos=False)
    rc = main(["generate", "--model", str(bert_dir), "--prompt", "the cat", "--gen-length",
               "4", "--cache-kv", "dual"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1 and "past_key_values" in err


def test_cli_cache_flag_runs_the_cache(llada, capsys):
    from unmask.cli import main

    runs = {}
    for cache in (None, "prefix", "dual"):
        argv = ["generate", "--model", llada.source, "--trust-remote-code", "--prompt",
                PROMPTS[0], "--gen-length", "16", "--block-length", "8", "--steps", "8",
                "--json", "--no-eos-stop"] + (["--cache-kv", cache] if cache else [])
        assert main(argv) == 0
        runs[cache] = capsys.readouterr().out
    want = {c: generate(llada, None, PROMPTS[0], gen_length=16, block_length=8, steps=8,
                        stop_at_eos=False, cache_kv=c)[0].text for c in runs}
    for cache, out in runs.items():
        assert json.loads(out)["text"] == want[cache] and json.loads(out)["nfe"] == 8
    assert want[None] != want["prefix"]  # on this prompt the cache changes a token


def test_lm_eval_model_takes_the_cache(llada):
    """``cache_kv`` in lm-eval's ``--model_args`` reaches :func:`generate`."""
    pytest.importorskip("lm_eval")
    from lm_eval.api.instance import Instance

    from unmask.lm_eval_model import UnmaskLM

    reqs = [Instance("generate_until", {}, (p, {"until": []}), i)
            for i, p in enumerate(PROMPTS[:2])]
    for cache in ("prefix", "dual"):
        lm = UnmaskLM.create_from_arg_string(
            f"pretrained={llada.source},trust_remote_code=True,gen_length=16,block_length=8,"
            f"steps=8,cache_kv={cache}", {"batch_size": 2})
        lm.model = llada  # the loaded module, eager attention as in the fixture
        want = generate(llada, None, list(PROMPTS[:2]), gen_length=16, block_length=8,
                        steps=8, cache_kv=cache)
        assert lm.generate_until(reqs) == [w.text for w in want]


@pytest.mark.parametrize("family, cache", [("llada", None), ("dream", None),
                                           ("llada", "prefix"), ("llada", "dual")])
@pytest.mark.parametrize("sampler", ["confidence", "threshold:tau=0.7"])
def test_output_layer_runs_on_the_current_blocks(family, cache, sampler, request):
    """A sampler reading eligible positions only gets the model's output layer run on the
    current block only; tokens and passes are those of the pass computed at every position."""
    import importlib

    from unmask import DecodeConfig, decode
    from unmask.generate import parse_sampler
    from unmask.samplers.wrapper import EveryPosition

    model = request.getfixturevalue(family)
    ids = model.tokenizer(PROMPTS[0])["input_ids"]
    x = torch.tensor([ids + [model.mask_id] * 16] * 2)
    x[1, 3] = int(x[0, 5])  # two distinct rows
    widths, rows_seen = [], []
    head = model.hf.get_output_embeddings()
    hook = head.register_forward_hook(lambda m, a, out: widths.append(out.shape[1]))
    loop = importlib.import_module("unmask.decode")
    real = loop.real_log_probs
    cfg = DecodeConfig(block_size=8, cache_kv=cache)
    try:
        loop.real_log_probs = lambda lg, mask: rows_seen.append(lg.shape[1]) or real(lg, mask)
        ours = decode(model, x, parse_sampler(sampler), cfg)
        narrow, widths[:] = list(widths), []
        ref = decode(model, x, EveryPosition(parse_sampler(sampler)), cfg)
    finally:
        loop.real_log_probs = real
        hook.remove()
    assert torch.equal(ours.tokens, ref.tokens) and torch.equal(ours.nfe, ref.nfe)
    n = x.shape[1]
    assert rows_seen[:len(narrow)] == [8] * len(narrow)  # the loop's log-softmax: one block
    # each pass, cached or not: the output layer on one block (Dream: shifted by one)
    assert set(narrow) == {8}
    assert set(widths) == {n} if cache is None else max(widths) == n


@pytest.mark.parametrize("family", ["llada", "dream", "bert"])
@pytest.mark.parametrize("lo, hi", [(0, 8), (8, 16), (3, 17), (0, 24)])
def test_logits_positions_are_those_of_the_whole_pass(family, lo, hi, request, bert_dir):
    """``logits_positions``: the logits and hidden states of those positions, as the whole
    pass gives them (Dream's shifted logits too), from an output layer that ran on those
    positions only."""
    model = (load_model(bert_dir) if family == "bert" else request.getfixturevalue(family))
    g = torch.Generator().manual_seed(1)
    x = torch.randint(5, 20, (2, 24), generator=g)
    x[:, 10:] = model.mask_id
    widths = []
    hook = model.hf.get_output_embeddings().register_forward_hook(
        lambda m, a, out: widths.append(out.shape[1]))
    try:
        with torch.no_grad():
            whole = model(x)
            part = model(x, logits_positions=slice(lo, hi))
    finally:
        hook.remove()
    assert widths == [24, hi - lo]
    torch.testing.assert_close(part.logits, whole.logits[:, lo:hi], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(part.hidden, whole.hidden[:, lo:hi])


@pytest.mark.parametrize("family", ["llada", "dream"])
@pytest.mark.parametrize("sampler", ["confidence", "threshold:tau=0.7"])
@pytest.mark.parametrize("min_new_tokens", [0, 5, 12])
def test_generate_with_min_new_tokens_runs_narrow(family, sampler, min_new_tokens, request,
                                                  monkeypatch):
    """``generate`` (its EOS stop, and ``min_new_tokens``' EOS ban at absolute positions)
    computes each pass's output layer and log-softmax on the current block only, with the
    tokens and passes of every position computed. The token these random models emit most
    counts as an EOS too, so the ban changes what they write."""
    import importlib

    from unmask.generate import parse_sampler
    from unmask.samplers.wrapper import EveryPosition

    model = request.getfixturevalue(family)
    frequent = {"llada": 38, "dream": 14}[family]
    monkeypatch.setattr(model, "eos_ids", (*model.eos_ids, frequent))
    loop = importlib.import_module("unmask.decode")
    real = loop.real_log_probs
    widths, rows_seen = [], []
    hook = model.hf.get_output_embeddings().register_forward_hook(
        lambda m, a, out: widths.append(out.shape[1]))
    kw = dict(gen_length=16, block_length=8, min_new_tokens=min_new_tokens)
    try:
        loop.real_log_probs = lambda lg, mask: rows_seen.append(lg.shape[1]) or real(lg, mask)
        ours = generate(model, None, list(PROMPTS), sampler=sampler, **kw)
        narrow, narrow_rows = list(widths), list(rows_seen)
        widths[:], rows_seen[:] = [], []
        ref = generate(model, None, list(PROMPTS),
                       sampler=EveryPosition(parse_sampler(sampler)), **kw)
    finally:
        loop.real_log_probs = real
        hook.remove()
    for a, b in zip(ours, ref, strict=True):
        assert a.token_ids == b.token_ids and a.nfe == b.nfe and a.sequences == b.sequences
        assert not set(model.eos_ids) & set(a.token_ids[:min_new_tokens])
    if not min_new_tokens:  # unbanned, the model writes it early: the ban has work to do
        assert frequent in ours[0].token_ids[:5]
    n = 8 + 16  # the prompt slots (one block) and gen_length
    # one block, or two where the rows are in different blocks (the threshold rule)
    assert narrow == narrow_rows and set(narrow) <= {8, 16} and 8 in narrow
    assert len(narrow) == max(g.nfe for g in ours)  # one output layer call per pass
    assert set(widths) == set(rows_seen) == {n}


@pytest.mark.parametrize("cache", ["prefix", "dual"])
@pytest.mark.parametrize("sampler", ["confidence", "threshold:tau=0.7"])
def test_cache_keeps_no_logits_for_eligible_only_samplers(llada, cache, sampler, monkeypatch):
    """With a sampler that reads the rows' blocks only, the cache keeps keys and values alone
    (no (B, N, V) logits between passes), rows in different blocks included; the tokens and
    passes are those of the same rule with every position computed, which keeps them."""
    import importlib

    from unmask import DecodeConfig, decode
    from unmask.generate import parse_sampler
    from unmask.kv_cache import BlockKVCache
    from unmask.samplers.wrapper import EveryPosition

    made = []

    class Recorded(BlockKVCache):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            made.append(self)

    monkeypatch.setattr(importlib.import_module("unmask.decode"), "BlockKVCache", Recorded)
    ids = llada.tokenizer(PROMPTS[0])["input_ids"]
    x = torch.tensor([ids + [llada.mask_id] * 24] * 3)
    x[1, 8:18] = torch.tensor(ids + ids[:2])  # starts in the third block of 8
    x[2, 3] = int(x[0, 5])
    cfg = DecodeConfig(block_size=8, cache_kv=cache)
    ours = decode(llada, x, parse_sampler(sampler), cfg)
    ref = decode(llada, x, EveryPosition(parse_sampler(sampler)), cfg)
    assert torch.equal(ours.tokens, ref.tokens) and torch.equal(ours.nfe, ref.nfe)
    narrow, whole = made
    assert narrow.logits is None and narrow.hidden is None and len(narrow.keys) > 0
    assert whole.logits.shape == (3, x.shape[1], llada.vocab_size)
