"""Perturbation probing, `unmask mi label --task text` and `unmask mi train` on tiny random
BERT masked LMs with a real-sized vocabulary (30,000 tokens): memory-bounded chunks, support-only
probes, labels equal to a dense reference where the dense one fits."""

import json
import math

import pytest
import torch

from unmask import UnmaskError
from unmask.cli import main
from unmask.mi import floor_sequences, naive_sequences, perturbation_mi
from unmask.mi.label_files import read_labels
from unmask.mi.label_set import LabelSet
from unmask.mi.labels import write_labels
from unmask.mi.probe import chunk_size
from unmask.models.auto import load_model
from unmask.probs import entropy_from_log_probs, real_log_probs
from unmask.text.labels import text_contexts, text_options

transformers = pytest.importorskip("transformers")

CORPUS = ("the cat sat on the mat . a big red dog ran on the moon and the sun . hello world . "
          "the dog sat and the cat ran . a red sun and a big moon . ") * 6


def write_vocab_bert(path, vocab_size, seed=0, init=1.0):
    """A random BERT masked LM with ``vocab_size`` word pieces (the tiny test words, then
    synthetic ones). A large ``initializer_range`` makes its marginals peaked, as a trained
    model's are, so eps-pruning keeps tens of tokens per position, not all or none."""
    import tiny_models

    path.mkdir(parents=True, exist_ok=True)
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + tiny_models.WORDS
    vocab += [f"w{i}" for i in range(vocab_size - len(vocab))]
    (path / "vocab.txt").write_text("\n".join(vocab) + "\n")
    tok = transformers.BertTokenizer(str(path / "vocab.txt"))
    cfg = transformers.BertConfig(vocab_size=vocab_size, hidden_size=32, num_hidden_layers=2,
                                  num_attention_heads=2, intermediate_size=64,
                                  max_position_embeddings=64, initializer_range=init)
    torch.manual_seed(seed)
    transformers.BertForMaskedLM(cfg).eval().save_pretrained(str(path))
    tok.save_pretrained(str(path))
    return path


@pytest.fixture(scope="module")
def big_bert_dir(tmp_path_factory):
    return write_vocab_bert(tmp_path_factory.mktemp("bert30k") / "m", 30_000)


@pytest.fixture(scope="module")
def big_bert(big_bert_dir):
    return load_model(big_bert_dir)


@pytest.fixture(scope="module")
def small_bert(tmp_path_factory):
    return load_model(write_vocab_bert(tmp_path_factory.mktemp("bert60") / "m", 60, seed=3))


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    path = tmp_path_factory.mktemp("text") / "corpus.txt"
    path.write_text(CORPUS)
    return path


class CallRecorder:
    """Wraps a model's forward and records the shape of every call's logits."""

    def __init__(self, model):
        self.shapes = []
        self.handle = model.register_forward_hook(
            lambda mod, args, out: self.shapes.append(tuple(out.logits.shape)))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.handle.remove()


def dense_mi(model, tokens):
    """Directed MI by the definition, one context and one probed position at a time, every
    real token probed in one batch: the (|V|, N, V) reference that fits at a small vocabulary."""
    real = model.real_token_mask
    ids = torch.tensor(model.real_token_ids)
    b, n = tokens.shape
    out = torch.zeros(b, n, n, dtype=torch.float64)
    with torch.inference_mode():
        for c in range(b):
            masked = tokens[c] == model.mask_id
            log_p = real_log_probs(model(tokens[c:c + 1]).logits.double(), real)[0]  # (N, V)
            h = entropy_from_log_probs(log_p)
            for i in masked.nonzero().flatten().tolist():
                x = tokens[c].repeat(len(ids), 1)
                x[:, i] = ids
                h_cond = entropy_from_log_probs(real_log_probs(model(x).logits.double(), real))
                cond = (log_p[i, ids].exp()[:, None] * h_cond).sum(0)  # (N,)
                cols = masked.clone()
                cols[i] = False
                out[c, i, cols] = (h - cond)[cols]
    return out


def contexts(model, b, n, seed, p_mask=0.6):
    g = torch.Generator().manual_seed(seed)
    ids = torch.tensor(model.real_token_ids)
    x = ids[torch.randint(0, len(ids), (b, n), generator=g)]
    x[torch.rand(b, n, generator=g) < p_mask] = model.mask_id
    x[:, 1] = model.mask_id  # every context has something to probe
    return x


def test_probing_equals_the_dense_definition_at_a_small_vocabulary(small_bert):
    x = contexts(small_bert, 2, 6, seed=0)
    ref = dense_mi(small_bert, x)
    v = small_bert.vocab_size
    # a call of at most 2 sequences' logits: the chunk shrinks, the result does not change
    with CallRecorder(small_bert) as rec:
        res = perturbation_mi(small_bert, x, max_logits=2 * 6 * v)
    assert max(s[0] for s in rec.shapes) == 2
    assert (res.directed - ref).abs().max() < 1e-5
    masked = x == small_bert.mask_id
    assert res.sequences == int(naive_sequences(x, small_bert.mask_id,
                                                len(small_bert.real_token_ids)).sum())
    assert res.support.tolist() == (masked.long() * len(small_bert.real_token_ids)).tolist()
    whole = perturbation_mi(small_bert, x)
    assert torch.allclose(whole.mi, res.mi, atol=1e-5)


def test_top_k_probes_exactly_k_tokens_and_stays_within_its_bound(small_bert):
    x = contexts(small_bert, 3, 7, seed=1)
    exact = perturbation_mi(small_bert, x)
    res = perturbation_mi(small_bert, x, top_k=5)
    masked = x == small_bert.mask_id
    assert res.probes.tolist() == (masked.long() * 5).tolist()
    assert res.row_sequences.tolist() == (1 + 5 * masked.sum(1)).tolist()
    assert ((res.directed - exact.directed).abs() <= res.directed_error_bound + 1e-6).all()
    assert float(res.dropped_mass.max()) > 0
    # k = R is no cap: the unpruned result
    p = perturbation_mi(small_bert, x, top_k=len(small_bert.real_token_ids))
    assert torch.allclose(p.mi, exact.mi, atol=1e-9) and float(p.dropped_mass.max()) < 1e-12


def test_probe_at_30k_tokens_evaluates_only_supported_tokens_in_bounded_calls(big_bert):
    n, v = 6, big_bert.vocab_size
    x = contexts(big_bert, 2, n, seed=2)
    masked = x == big_bert.mask_id
    budget = 5 * n * v  # 5 sequences' logits per call
    with CallRecorder(big_bert) as rec:
        res = perturbation_mi(big_bert, x, eps=1e-2, batch_size=64, max_logits=budget)
    assert chunk_size(64, n, v, budget) == 5
    assert max(s[0] for s in rec.shapes) <= 5
    assert max(math.prod(s) for s in rec.shapes) <= budget  # no call holds more logits
    assert sum(s[0] for s in rec.shapes) == res.sequences  # every evaluated sequence counted
    assert res.model_calls == len(rec.shapes)
    # cost = 1 + supported tokens per position (each row here admits at least one token)
    assert bool((res.support[masked] >= 1).all())
    assert res.row_sequences.tolist() == (1 + res.support.sum(1)).tolist()
    assert torch.equal(floor_sequences(res), res.row_sequences)
    naive = naive_sequences(x, big_bert.mask_id, len(big_bert.real_token_ids))
    assert bool((naive > 100 * res.row_sequences).all())  # far below 1 + |M||V|
    assert int(res.support.max()) <= 100  # eps bounds a row's support by 1/eps, whatever |V|
    # the same probes in other chunks: the same result
    with CallRecorder(big_bert) as rec:
        other = perturbation_mi(big_bert, x, eps=1e-2, batch_size=16, max_logits=budget * 4)
    assert max(s[0] for s in rec.shapes) == 16
    assert torch.allclose(other.mi, res.mi, atol=1e-5) and other.sequences == res.sequences


def test_bad_probe_arguments(small_bert):
    x = contexts(small_bert, 1, 5, seed=0)
    for kwargs, field in [({"top_k": 0}, "top_k"), ({"top_k": 1.5}, "top_k"),
                          ({"max_logits": 0}, "max_logits")]:
        with pytest.raises(UnmaskError, match=field):
            perturbation_mi(small_bert, x, **kwargs)


def test_text_contexts_are_pure_windows_of_the_corpus(big_bert, corpus):
    opts = text_options(corpus, 10)
    batch = text_contexts(5, 3, 4, (0.3, 0.6), model=big_bert, **opts)
    one = torch.cat([text_contexts(5, 3 + k, 1, (0.3, 0.6), model=big_bert, **opts)
                     for k in range(4)])
    assert torch.equal(batch, one) and batch.shape == (4, 10)
    tok = big_bert.tokenizer
    assert (batch[:, 0] == tok.cls_token_id).all() and (batch[:, -1] == tok.sep_token_id).all()
    masked = batch == big_bert.mask_id
    assert bool((masked.sum(1) >= round(0.3 * 8)).all() and (masked.sum(1) <= 5).all())
    ids = tok(CORPUS, add_special_tokens=False)["input_ids"]
    for row in batch:  # the revealed tokens are a window of the corpus
        body = row[1:-1]
        hit = any(all(m or int(t) == ids[s + k] for k, (t, m) in
                      enumerate(zip(body, body == big_bert.mask_id, strict=True)))
                  for s in range(len(ids) - 8 + 1))
        assert hit, row


def test_mi_label_text_and_mi_train_on_a_30k_vocabulary(big_bert, big_bert_dir, corpus,
                                                         tmp_path, capsys):
    out = tmp_path / "labels"
    args = ["mi", "label", "--task", "text", "--model", str(big_bert_dir), "--text",
            str(corpus), "--length", "10", "--contexts", "6", "--shard-size", "3",
            "--mask-ratio", "0.3:0.8", "--top-k", "6", "--eps", "1e-3", "--batch-size", "16",
            "--out", str(out), "--threads", "1"]
    assert main(args) == 0
    tensors, manifest = read_labels(out)
    ident = manifest["identity"]
    assert ident["task"] == "text" and ident["top_k"] == 6
    assert ident["options"]["length"] == 10 and ident["model_fingerprint"] == \
        big_bert.fingerprint()
    tokens = tensors["tokens"]
    assert tokens.shape == (6, 10)
    # the labels are the probe on the stored contexts, and each context costs
    # 1 + |M| min(k, supported) sequences: at most 1 + 6 |M|, not 1 + |M| |V|
    res = perturbation_mi(big_bert, tokens, eps=1e-3, top_k=6)
    assert torch.allclose(tensors["mi"], res.mi.float(), atol=1e-5)
    assert tensors["sequences"].tolist() == res.row_sequences.tolist()
    m = (tokens == big_bert.mask_id).sum(1)
    assert bool((tensors["sequences"] <= 1 + 6 * m).all())
    # resumable: the same arguments find every shard done
    assert main(args) == 0
    assert "done already" in capsys.readouterr().out
    # the estimator trains on these labels, reading hidden states of layer 1
    est = tmp_path / "est"
    assert main(["mi", "train", "--model", str(big_bert_dir), "--labels", str(out), "--out",
                 str(est), "--epochs", "2", "--batch-size", "4", "--held-out", "0.34",
                 "--layer", "1", "--d", "16", "--pair-rank", "4", "--threads", "1"]) == 0
    cfg = json.loads((est / "best" / "config.json").read_text())
    assert cfg["config"]["model_fingerprint"] == big_bert.fingerprint()
    assert cfg["config"]["layer"] == 1 and cfg["config"]["hidden_size"] == 32
    labels = LabelSet.from_dir(out)
    labels.check_model(big_bert)


def one_line_error(capsys, argv, needle):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and needle in err and "\n" not in err, err


def test_text_task_bad_input(big_bert_dir, corpus, tmp_path, capsys):
    short = tmp_path / "short.txt"
    short.write_text("the cat")
    model = ["--model", str(big_bert_dir)]
    cases = [(["--task", "text", *model], "--text"),
             (["--text", str(corpus)], "--text: applies only"),
             (["--task", "text", "--text", str(corpus)], "no shipped model"),
             (["--task", "text", "--text", str(tmp_path / "none.txt"), *model], "text:"),
             (["--task", "text", "--text", str(short), *model], "fewer than"),
             (["--task", "text", "--text", str(corpus), "--length", "500", *model],
              "max_length")]
    for k, (argv, needle) in enumerate(cases):
        out = tmp_path / f"o{k}"
        one_line_error(capsys, ["mi", "label", "--contexts", "1", "--out", str(out), *argv],
                       needle)
        assert not (out / "manifest.json").exists() and not (out / "shard-00000.safetensors"
                                                             ).exists()


def test_write_labels_checks_task_options(big_bert, corpus, tmp_path):
    with pytest.raises(UnmaskError, match="options: the text task takes"):
        write_labels(big_bert, tmp_path / "a", contexts=1, task="text")
    with pytest.raises(UnmaskError, match="options: the sudoku task takes none"):
        write_labels(big_bert, tmp_path / "b", contexts=1, task="sudoku",
                     options=text_options(corpus, 10))


def test_calls_are_bounded_by_the_models_activations_too(small_bert, monkeypatch):
    import unmask.mi.probe as probe

    # AntiBERTy's shape (64 tokens, 25 ids, d=512): logits allow 4096 sequences a call, its
    # activations (~8,000 floats a token) 256
    assert chunk_size(4096, 64, 25, probe.MAX_LOGITS) == 4096
    assert chunk_size(4096, 64, 25, probe.MAX_LOGITS, 512) == (1 << 27) // (64 * 16 * 512)
    assert chunk_size(4096, 64, 25, probe.MAX_LOGITS, 512, max_activations=1) == 1
    x = contexts(small_bert, 3, 6, seed=4)
    whole = perturbation_mi(small_bert, x)
    n, d = 6, small_bert.hidden_size
    monkeypatch.setattr(probe, "MAX_ACTIVATIONS", 3 * n * probe.ACTIVATIONS_PER_HIDDEN * d)
    with CallRecorder(small_bert) as rec:
        res = perturbation_mi(small_bert, x)
    assert max(s[0] for s in rec.shapes) == 3
    assert torch.allclose(whole.mi, res.mi, atol=1e-6) and whole.sequences == res.sequences
