"""`generate` wraps its sampler in StopAtEOS: the wrapped sampler is still prepared and asked
for what it needs (estimators loaded from a folder, hidden layers, attention weights)."""

import json

import pytest
import torch

from unmask.cli import main
from unmask.generate import generate
from unmask.mi.estimator import EstimatorConfig, MIEstimator
from unmask.models.auto import load_model
from unmask.samplers.spec import parse_spec


@pytest.fixture(scope="module")
def estimator_dir(llada_dir, tmp_path_factory):
    """An (untrained) MI estimator tied to the tiny LLaDA model, reading a hidden layer."""
    model = load_model(llada_dir, trust_remote_code=True)
    torch.manual_seed(0)
    est = MIEstimator(EstimatorConfig(hidden_size=model.hidden_size, layer=1, d=8,
                                      n_heads=2, pair_rank=4,
                                      model_fingerprint=model.fingerprint()))
    path = tmp_path_factory.mktemp("est") / "e"
    est.save(path)
    return path


@pytest.mark.parametrize("spec", ["mi-guided:gamma=1.0,estimator={}",
                                  "demask:bound=0.5,estimator={}",
                                  "mi-guided:gamma=1.0,estimator={}+verify"])
def test_generate_loads_the_estimator_a_spec_names(llada_dir, estimator_dir, spec, capsys):
    spec = spec.format(estimator_dir)
    argv = ["generate", "--model", str(llada_dir), "--trust-remote-code", "--prompt",
            "the cat", "a dog ran", "--gen-length", "8", "--block-length", "4", "--sampler",
            spec, "--json", "--threads", "1"]
    assert main(argv) == 0
    lines = [json.loads(s) for s in capsys.readouterr().out.splitlines()]
    assert len(lines) == 2 and all(d["nfe"] >= 1 for d in lines)
    # the same decode as the library's, row for row
    model = load_model(llada_dir, trust_remote_code=True)
    out = generate(model, None, ["the cat", "a dog ran"], sampler=parse_spec(spec).build(),
                   gen_length=8, block_length=4)
    assert [g.nfe for g in out] == [d["nfe"] for d in lines]
    assert [g.text for g in out] == [d["text"] for d in lines]


@pytest.mark.parametrize("sampler, needle", [
    ("demask", "estimator: no shipped MI estimator for this model"),
    ("dapd", "dapd: HFMaskedModel returns no attention weights"),
])
def test_generate_refuses_what_the_model_cannot_give_in_one_line(llada_dir, sampler, needle,
                                                                  capsys):
    argv = ["generate", "--model", str(llada_dir), "--trust-remote-code", "--prompt",
            "What is 2 + 3?", "--gen-length", "4", "--sampler", sampler, "--json"]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and needle in err and "\n" not in err, err


def test_a_transformers_model_gives_attention_weights_to_dapd(bert_dir, capsys):
    """A library model (BERT) gives (B, H, N, N) row-stochastic attention weights through
    eager attention for the calls that ask, its own implementation kept for the rest; a
    wrapped ``dapd`` reads them."""
    import torch

    model = load_model(bert_dir)
    assert model.supports_attentions
    impl = model.hf.config._attn_implementation
    tokens = torch.tensor([[2, 5, 4, 6, 4, 3]])
    out = model(tokens, output_attentions=True)
    assert model.hf.config._attn_implementation == impl
    assert len(out.attentions) == 2 and out.attentions[0].shape == (1, 2, 6, 6)
    for a in out.attentions:
        torch.testing.assert_close(a.sum(-1), torch.ones(1, 2, 6))
    torch.testing.assert_close(out.logits, model(tokens).logits)
    argv = ["generate", "--model", str(bert_dir), "--prompt", "the cat", "--gen-length", "4",
            "--sampler", "dapd", "--json", "--threads", "1"]
    assert main(argv) == 0
    assert json.loads(capsys.readouterr().out)["nfe"] >= 1
