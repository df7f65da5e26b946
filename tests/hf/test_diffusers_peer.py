"""Peer check: diffusers' LLaDA2Pipeline + BlockRefinementScheduler, and its
EntropyBoundScheduler's acceptance rule, against unmask on the same tiny model.

The tiny model here is block-causal in the sense LLaDA2 is (a position reads only positions
at or before it), because the pipeline runs the model on the prefix up to the current block
while unmask runs it on the whole row; for such a model the two see the same logits. Its
special ids other than EOS carry a -1e9 logit, because diffusers takes argmax/softmax over
the whole vocabulary (it may emit MASK or PAD) and unmask over the real tokens only.
"""

import pytest
import torch

from unmask import DecodeConfig, decode, make_sampler
from unmask.generate import generate
from unmask.models.auto import load_model

diffusers = pytest.importorskip("diffusers")


@pytest.mark.parametrize("tau", [0.05, 0.2, 0.5, 0.9])
def test_threshold_decoding_equals_llada2_pipeline(causal_llada_dir, tau):
    model = load_model(causal_llada_dir, trust_remote_code=True)
    tok = model.tokenizer
    prompt = tok("the cat sat on")["input_ids"]
    assert len(prompt) == 4  # whole blocks: the pipeline's blocks count from position 0
    calls = []
    hook = model.hf.register_forward_hook(lambda *a: calls.append(1))
    pipe = diffusers.LLaDA2Pipeline(model=model.hf,
                                    scheduler=diffusers.BlockRefinementScheduler(),
                                    tokenizer=tok)
    pipe.set_progress_bar_config(disable=True)
    out = pipe(input_ids=torch.tensor([prompt]), use_chat_template=False, gen_length=12,
               block_length=4, num_inference_steps=4, threshold=tau, editing_threshold=None,
               minimal_topk=1, eos_early_stop=False, sampling_method="greedy",
               temperature=0.0, output_type="seq")
    hook.remove()
    (ours,) = generate(model, tok, "the cat sat on", sampler=f"threshold:tau={tau}",
                       gen_length=12, block_length=4, stop_at_eos=False)
    assert ours.token_ids == out.sequences[0].tolist()
    # the pipeline runs one more pass in each block it fills before its step budget
    assert ours.nfe <= len(calls) <= ours.nfe + 3


@pytest.mark.parametrize("gamma", [0.0, 0.3, 1.0, 3.0])
def test_entropy_bound_acceptance_equals_eb_sampler(llada_dir, gamma):
    model = load_model(llada_dir, trust_remote_code=True)
    x = torch.tensor([[4, 5, 7] + [model.mask_id] * 12, [9, 10, 15] + [model.mask_id] * 12])
    res = decode(model, x, make_sampler("eb", gamma=gamma), DecodeConfig(record_history=True))
    ours = (res.history[0] != model.mask_id)[:, 3:]
    sched = diffusers.EntropyBoundScheduler(entropy_bound=gamma, t_max=1.0, t_min=1.0)
    sched.set_timesteps(4)
    with torch.no_grad():
        logits = model.hf(input_ids=x).logits[:, 3:]
    theirs = sched.step(logits, 0, x[:, 3:], generator=torch.Generator().manual_seed(0))
    assert torch.equal(ours, theirs.accepted_index)
    assert int(ours.sum()) >= 2


@pytest.mark.parametrize("spec, steps_per_block, threshold", [
    ("confidence", 4, 1.5), ("topk:k=2", 2, 1.5), ("threshold:tau=0.5", 4, 0.5)])
def test_block_causal_model_runs_on_the_prefix_as_the_pipeline(causal_llada_dir, spec,
                                                               steps_per_block, threshold):
    """The model declares itself causal (config ``causal``), so unmask runs it on the rows up
    to the end of the current block, as the pipeline does: the same tokens at batch 3, and
    every pass on a prefix the pipeline also runs on."""
    model = load_model(causal_llada_dir, trust_remote_code=True)
    assert model.block_causal == 1
    tok = model.tokenizer
    prompts = ["the cat sat on", "a dog ran .", "hello big red sun"]
    ids = torch.tensor([tok(p)["input_ids"] for p in prompts])
    lengths = {"pipeline": [], "unmask": []}
    engine = "pipeline"
    hook = model.hf.register_forward_pre_hook(
        lambda m, a, kw: lengths[engine].append(kw.get("input_ids", a and a[0]).shape[1]),
        with_kwargs=True)
    pipe = diffusers.LLaDA2Pipeline(model=model.hf,
                                    scheduler=diffusers.BlockRefinementScheduler(),
                                    tokenizer=tok)
    pipe.set_progress_bar_config(disable=True)
    try:
        out = pipe(input_ids=ids, use_chat_template=False, gen_length=12, block_length=4,
                   num_inference_steps=steps_per_block, threshold=threshold,
                   editing_threshold=None, minimal_topk=1, eos_early_stop=False,
                   sampling_method="greedy", temperature=0.0, output_type="seq")
        engine = "unmask"
        ours = generate(model, tok, prompts, sampler=spec, gen_length=12, block_length=4,
                        stop_at_eos=False)
    finally:
        hook.remove()
    assert [o.token_ids for o in ours] == out.sequences.tolist()
    assert set(lengths["unmask"]) == set(lengths["pipeline"]) == {8, 12, 16}
    assert len(lengths["unmask"]) == max(o.nfe for o in ours)
