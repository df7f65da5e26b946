"""Batch-invariant passes and --compile on a tiny LLaDA (LLaDA's own code): with
``batch_invariant`` the model only ever runs one row, at the shapes of the row alone, with and
without Fast-dLLM's cache; the CLI flags reach generate."""

import json

import pytest
import torch
from dllm_models import require_external, write_llada

from unmask.cli import main
from unmask.generate import generate
from unmask.models.auto import load_model

#: equal-length prompts (one block of 8 each)
PROMPTS = ["w5 w17 w33 w8 w40 w12 w61 w9", "w70 w3 w28 w44 w19 w7 w7 w60",
           "w9 w8 w7 w6 w5 w4 w3 w11"]


@pytest.fixture(scope="module")
def llada(tmp_path_factory):
    require_external()
    return load_model(write_llada(tmp_path_factory.mktemp("llada") / "m"),
                      trust_remote_code=True)


@pytest.mark.usefixtures("eager_attention")
@pytest.mark.parametrize("cache", [None, "prefix", "dual"])
@pytest.mark.parametrize("sampler, steps", [("confidence", 8), ("threshold:tau=0.7", None)])
def test_each_pass_runs_one_row_and_rows_equal_themselves_alone(llada, cache, sampler, steps):
    shapes = []
    hook = llada.hf.register_forward_pre_hook(
        lambda m, a, kw: shapes.append(tuple(kw["input_ids"].shape)), with_kwargs=True)
    kw = dict(sampler=sampler, gen_length=16, block_length=8, steps=steps, stop_at_eos=False,
              cache_kv=cache)
    try:
        batch = generate(llada, None, PROMPTS, batch_invariant=True, **kw)
        in_batch, shapes[:] = set(shapes), []
        alone = [generate(llada, None, p, **kw)[0] for p in PROMPTS]
        shapes_alone = set(shapes)
    finally:
        hook.remove()
    assert {s[0] for s in in_batch} == {1}
    assert in_batch == shapes_alone  # the very shapes of the rows alone
    for got, want in zip(batch, alone, strict=True):
        assert got.token_ids == want.token_ids and got.nfe == want.nfe
    default = generate(llada, None, PROMPTS, **kw)  # on the CPU, batched passes agree
    assert [g.token_ids for g in default] == [g.token_ids for g in batch]


@pytest.mark.usefixtures("eager_attention")
def test_cli_batch_invariant_flag(llada, capsys):
    argv = ["generate", "--model", llada.source, "--trust-remote-code", "--prompt", *PROMPTS,
            "--gen-length", "16", "--block-length", "8", "--steps", "8", "--json",
            "--no-eos-stop", "--batch-invariant"]
    assert main(argv) == 0
    texts = [json.loads(line)["text"] for line in capsys.readouterr().out.splitlines()]
    want = generate(llada, None, PROMPTS, gen_length=16, block_length=8, steps=8,
                    stop_at_eos=False)
    assert texts == [g.text for g in want]


@pytest.mark.slow
def test_compile_gives_the_eager_tokens(llada, capsys):
    """``--compile`` (torch.compile of LLaDA's forward, CPU default mode), dual cache: the
    block passes share one shape; the tokens are the eager ones."""
    kw = dict(gen_length=16, block_length=8, steps=8, stop_at_eos=False, cache_kv="dual")
    with torch._dynamo.config.patch(disable=True):
        eager = generate(llada, None, PROMPTS[0], **kw)
    fast = generate(llada, None, PROMPTS[0], compile=True, **kw)
    assert fast[0].token_ids == eager[0].token_ids
    assert "forward" not in vars(llada.hf)


@pytest.mark.usefixtures("eager_attention")
@pytest.mark.parametrize("cache", ["prefix", "dual"])
def test_a_cached_pass_reads_the_host_three_times(llada, cache):
    """The loop's stopping check, the blocks the pass computes, and the cache's grouping of
    rows into calls (entering a block or not, padded or not): one read each at most, the
    stopping check every pass, the other two only after a row entered a block or left the
    batch. (LLaDA's own code reads positions with ``.item()`` in its cached attention: not
    counted here.)"""
    from unmask.host_reads import count_host_reads

    kw = dict(sampler="threshold:tau=0.7", gen_length=16, block_length=8, stop_at_eos=False,
              cache_kv=cache)
    with count_host_reads(sites=True) as reads:
        out = generate(llada, None, PROMPTS, **kw)
    passes = max(g.nfe for g in out)
    per_site = {site: n for site, n in reads.by_site.items()
                if site.startswith(("decode.py", "kv_cache.py", "threshold.py", "base.py"))}
    assert sum(per_site.values()) <= 3 * passes
    by_name = {site.split(" ")[-1]: n for site, n in per_site.items()}
    assert by_name.keys() == {"_stop_if_broken", "_span", "_groups"}
    assert by_name["_stop_if_broken"] == passes
    assert 0 < by_name["_span"] < passes and 0 < by_name["_groups"] < passes
