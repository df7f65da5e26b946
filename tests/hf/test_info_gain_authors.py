"""unmask's Info-Gain and LookUM decode as the authors' own sampler does.

The peer is ``InfoGainSampler.sample`` from yks23/Information-Gain-Sampler (the Info-Gain
paper's code, ``../shared/external/info-gain-sampler/info_gain.py``, loaded from there; skipped
when the folder is absent). Both decode the same model (a random LLaDA-style folder through the
HF adapter, and the shipped text model), prompts, block size and steps; unmask with the
``info-gain-authors`` / ``lookum-authors`` presets, the authors with their defaults.

How the draws are matched at temperature > 0: the authors' code draws with torch's global
generator (``uniform_`` inside ``_add_gumbel_noise``, ``torch.rand`` for the position noise).
:class:`Draws` replaces those two calls in the loaded module (nothing else of it) with unmask's
counter-based draws for the same step, in the order the authors consume them:

* the first ``_add_gumbel_noise`` of a step (their x0 of the candidates, or of the bypass's
  greedy fill) gets the loop's proposal noise, ``row_gumbel(seed, step, stream 0, (N, V))``;
* the j-th after it (candidate c = j's tokens) gets slice j - 1 of the lookahead sampler's
  stream 1, shape (n_candidates - 1, N, V) (``draw='gumbel'``);
* the ``torch.rand(nv)`` of candidate c gets the uniforms of stream 2, row c - 1, at the
  block's masked positions (``tau_pos``'s Gumbel noise: theirs adds 1e-10 inside the logs).

A step starts at each call of ``_generate_candidates`` or ``_greedy_unmask`` (one pass each).
What the model sees: the authors' code takes logits over the whole vocabulary, unmask's over
real tokens only, so the authors' model is the same HF module with the logits of the other ids
(MASK, PAD, BOS) set to -inf.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from unmask.decode import DecodeConfig, decode
from unmask.models.auto import load_model
from unmask.presets import preset_spec
from unmask.rng import row_gumbel, row_uniform
from unmask.samplers.spec import parse_spec

EXTERNAL = Path(__file__).resolve().parents[2].parent / "shared/external/info-gain-sampler"
N_CANDIDATES, TAU_POS = 8, 0.2  # the authors' defaults


def authors_module():
    """A fresh copy of the authors' module (each test patches its own)."""
    path = EXTERNAL / "info_gain.py"
    if not path.exists():
        pytest.skip("../shared/external/info-gain-sampler is absent")
    spec = importlib.util.spec_from_file_location("authors_info_gain", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


class AuthorsModel:
    """The HF module as the authors call it (``model(input_ids=, attention_mask=).logits``),
    -inf on ids unmask never emits; counts calls and rows."""

    def __init__(self, model):
        self.hf, self.real = model.hf, model.real_token_mask
        self.calls = self.rows = 0

    def __call__(self, input_ids, attention_mask=None):
        self.calls += 1
        self.rows += input_ids.shape[0]
        with torch.no_grad():
            logits = self.hf(input_ids=input_ids, attention_mask=attention_mask).logits
        return SimpleNamespace(logits=logits.float().masked_fill(~self.real, -torch.inf))


class _TorchWithRand:
    """The ``torch`` the authors' module sees: torch, with ``rand`` ours."""

    def __init__(self, rand):
        self.rand = rand

    def __getattr__(self, name):
        return getattr(torch, name)


class Draws:
    """Feeds the authors' module unmask's counter-based draws (see the module docstring) and
    counts their steps, bypasses and scored candidates."""

    def __init__(self, mod, seed: int):
        self.seeds = torch.tensor([seed])
        self.step, self.noise_calls, self.rand_calls = -1, 0, 0
        self.valid, self.n = None, 0
        self.bypassed = self.candidates = 0
        gen, greedy = mod._generate_candidates, mod.InfoGainSampler._greedy_unmask
        score = mod._score_candidates

        def generate_candidates(logits, x, mask_allowed, bs, be, *rest):
            self._new_step(x.shape[1])
            block = torch.zeros_like(mask_allowed[0])
            block[bs:be] = mask_allowed[0, bs:be]
            self.valid = block.nonzero().squeeze(1)
            out = gen(logits, x, mask_allowed, bs, be, *rest)
            if out[0] is None:  # their single-candidate path
                self.candidates += 1
            return out

        def greedy_unmask(x, *rest):
            self._new_step(x.shape[1])
            self.bypassed += 1
            return greedy(x, *rest)

        def score_candidates(logits, next_logits, x_batch, actions, *rest):
            self.candidates += len(actions)
            return score(logits, next_logits, x_batch, actions, *rest)

        mod._generate_candidates = generate_candidates
        mod._score_candidates = score_candidates
        mod.InfoGainSampler._greedy_unmask = staticmethod(greedy_unmask)
        mod._add_gumbel_noise = self.add_gumbel_noise
        mod.torch = _TorchWithRand(self.rand)

    def _new_step(self, n: int):
        self.step, self.noise_calls, self.rand_calls, self.n = self.step + 1, 0, 0, n

    def add_gumbel_noise(self, logits, temperature):
        if temperature == 0.0:
            return logits
        step = torch.tensor([self.step])
        n, v = logits.shape[1:]
        j, self.noise_calls = self.noise_calls, self.noise_calls + 1
        g = (row_gumbel(self.seeds, step, 0, (n, v)) if j == 0
             else row_gumbel(self.seeds, step, 1, (n, v), start=(j - 1) * n * v))
        return logits + temperature * g

    def rand(self, nv, device=None):
        assert nv == len(self.valid)
        c, self.rand_calls = self.rand_calls + 1, self.rand_calls + 1
        u = row_uniform(self.seeds, torch.tensor([self.step]), 2, (self.n,),
                        start=(c - 1) * self.n)
        return u[0, self.valid]


def authors_decode(model, prompt: list[int], gen: int, block: int, temperature: float,
                   variant: str, seed: int, threshold: float = 0.8):
    """(tokens (1, P + gen), Draws, AuthorsModel) of the authors' sampler, steps = gen."""
    mod = authors_module()
    draws, view = Draws(mod, seed), AuthorsModel(model)
    sampler = mod.InfoGainSampler(view, tokenizer=None, mask_id=model.mask_id)
    out = sampler.sample(torch.tensor([prompt]), max_new_tokens=gen, steps=gen,
                         block_size=block, candidate_number=N_CANDIDATES,
                         position_temperature=TAU_POS, threshold=threshold,
                         temperature=temperature, variant=variant)
    return out, draws, view


def unmask_decode(model, prompts: list[list[int]], gen: int, block: int, temperature: float,
                  variant: str, seed: int, threshold: float = 0.8):
    name = {"info_gain": "info-gain-authors", "lookum": "lookum-authors"}[variant]
    spec = preset_spec(name)
    if threshold != 0.8:
        spec = spec.replace("bypass=0.8", f"bypass={threshold}")
    tokens = torch.tensor([p + [model.mask_id] * gen for p in prompts])
    return decode(model, tokens, parse_spec(spec).build(),
                  DecodeConfig(temperature=temperature, block_size=block), seed=seed)


def check_equal(model, prompts, gen, block, temperature, variant, seed, threshold=0.8):
    """unmask's batch of ``prompts`` (row r at seed + r) against the authors' one prompt at a
    time; returns the authors' bypass count over the prompts."""
    res = unmask_decode(model, prompts, gen, block, temperature, variant, seed, threshold)
    fired = 0
    for r, prompt in enumerate(prompts):
        theirs, draws, view = authors_decode(model, prompt, gen, block, temperature, variant,
                                             seed + r, threshold)
        assert (theirs != model.mask_id).all()
        assert res.tokens[r].tolist() == theirs[0].tolist(), f"row {r}"
        # the same steps, bypasses and candidates scored; no pass or sequence theirs lacks
        assert int(res.steps[r]) == draws.step + 1
        assert int(res.stats["bypassed"][r]) == draws.bypassed
        assert int(res.stats["candidates"][r]) == draws.candidates
        assert int(res.nfe[r]) <= view.calls and int(res.sequences[r]) <= view.rows
        fired += draws.bypassed
    return fired


@pytest.fixture(scope="module")
def llada(llada_dir):
    return load_model(llada_dir, trust_remote_code=True)


@pytest.fixture(scope="module")
def text_model():
    model = load_model("text")
    if model.tokenizer is None:  # its tokenizer file is read by transformers 5 (the extra's)
        pytest.skip("the shipped text model's tokenizer needs transformers >= 5")
    return model


LLADA_PROMPTS = [[4, 5, 6, 7, 8], [9, 10, 11, 12, 13]]


SLOW = pytest.mark.slow


def cases(fast, grid):
    """``fast`` in the default suite, the rest of ``grid`` marked slow."""
    return [pytest.param(*c, marks=() if c in fast else SLOW) for c in grid]


LLADA_GRID = [(v, t, g, b) for g, b in [(48, 16), (64, 32)] for t in (0.0, 0.7, 1.5)
              for v in ("info_gain", "lookum")]


@pytest.mark.parametrize("variant,temperature,gen,block",
                         cases([("info_gain", 0.7, 48, 16)], LLADA_GRID))
def test_random_llada_decodes_as_the_authors(llada, variant, temperature, gen, block):
    check_equal(llada, LLADA_PROMPTS, gen, block, temperature, variant, seed=3)


@pytest.mark.parametrize("temperature", cases([(1.0,)], [(0.0,), (1.0,)]))
def test_the_block_bypass_fires_and_still_agrees(llada, temperature):
    # a low threshold so that the authors' greedy fill of the whole block happens
    fired = check_equal(llada, LLADA_PROMPTS, 48, 16, temperature, "info_gain", seed=0,
                        threshold=0.3)
    assert fired > 0


def text_prompts(model, texts):
    tok = model.tokenizer
    return [[int(i) for i in tok(t)["input_ids"]] for t in texts]


@pytest.mark.parametrize("variant,temperature", cases(
    [("info_gain", 1.0)], [(v, t) for t in (0.0, 1.0) for v in ("info_gain", "lookum")]))
def test_shipped_text_model_decodes_as_the_authors(text_model, variant, temperature):
    prompts = text_prompts(text_model, ["15 - 43 - 75 =", "12 + 34 + 56 ="])
    assert len({len(p) for p in prompts}) == 1
    check_equal(text_model, prompts, 32, 16, temperature, variant, seed=7)
