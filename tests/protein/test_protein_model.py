"""The protein MDM: PAD as given context, loading, held-out loss, and the CLI."""

import json

import numpy as np
import pytest
import torch

from unmask import UnmaskError
from unmask.bench.contract import BenchRow
from unmask.bench.rows import aup
from unmask.cli import main
from unmask.decode import decode
from unmask.models import MDMTransformer, TransformerConfig
from unmask.models.auto import load_model
from unmask.protein.data import CropSampler
from unmask.protein.model import (
    ProteinMDM,
    check_protein_model,
    load_protein_model,
    protein_model_config,
)
from unmask.protein.tokens import MASK_ID, PAD_ID, generation_inputs
from unmask.protein.train import heldout_eval_set, masked_loss

pytest.importorskip("pyhmmer")
TINY = {"d_model": 16, "d_ff": 32, "n_layers": 1, "n_heads": 2}


@pytest.fixture
def tiny_protein():
    torch.manual_seed(0)
    return ProteinMDM(protein_model_config(**TINY)).eval()


def test_decoding_fills_exactly_the_given_length(tiny_protein):
    lengths = np.array([50, 77, 100])
    x = generation_inputs(lengths)
    res = decode(tiny_protein, x, "confidence")
    assert res.nfe.tolist() == lengths.tolist()  # one residue per pass
    filled = res.tokens != PAD_ID
    assert filled.sum(1).tolist() == lengths.tolist()
    assert bool((res.tokens[filled] < 20).all())
    assert torch.equal(res.tokens == PAD_ID, x == PAD_ID)


def test_pad_in_the_middle_is_rejected(tiny_protein):
    x = generation_inputs(np.array([10]))
    x[0, 3] = PAD_ID
    with pytest.raises(UnmaskError, match="PAD must only follow"):
        decode(tiny_protein, x, "confidence")


def test_uniform_model_has_held_out_loss_log_20(tiny_protein):
    torch.nn.init.zeros_(tiny_protein.head.weight)
    torch.nn.init.zeros_(tiny_protein.head.bias)
    rng = np.random.default_rng(0)
    inputs, targets, masked = heldout_eval_set(CropSampler([rng.integers(0, 20, 300)]), n=16)
    assert not bool(masked[targets == PAD_ID].any())
    assert bool((inputs[masked] == MASK_ID).all())
    m = masked_loss(tiny_protein, inputs, targets, masked, batch_size=5)
    assert m["heldout_loss"] == pytest.approx(np.log(20), abs=1e-6)


def test_save_load_and_model_checks(tiny_protein, tmp_path):
    tiny_protein.save_pretrained(tmp_path / "m")
    loaded = load_protein_model(tmp_path / "m")
    assert isinstance(loaded, ProteinMDM) and loaded.fingerprint() == tiny_protein.fingerprint()
    sudoku_like = MDMTransformer(TransformerConfig(vocab_size=10, mask_id=9, max_length=81,
                                                   d_model=16, n_heads=2, d_ff=32))
    with pytest.raises(UnmaskError, match="expected a protein model"):
        check_protein_model(sudoku_like)
    sudoku_like.save_pretrained(tmp_path / "s")
    with pytest.raises(UnmaskError, match="expected a protein model"):
        load_protein_model(tmp_path / "s")
    with pytest.raises(UnmaskError, match="neither a model folder nor a shipped model"):
        load_protein_model("no-such-model")
    # the generic loader recognises a protein model by its config and reads PAD as given

    generic = load_model(tmp_path / "m")
    assert isinstance(generic, ProteinMDM) and generic.fingerprint() == tiny_protein.fingerprint()
    generic.check_tokens(generation_inputs(torch.tensor([3, 5]), 8))
    assert type(load_model(tmp_path / "s")) is MDMTransformer
    # a broken config is one clear error from either loader, never a JSON traceback
    (tmp_path / "s" / "config.json").write_text("{not json")
    for loader in (load_model, load_protein_model):
        with pytest.raises(UnmaskError, match="config.json is not JSON"):
            loader(tmp_path / "s")


def run_train(tmp_path, *extra):
    return main(["protein", "train", "--out", str(tmp_path / "run"), "--batch-size", "8",
                 "--eval-every", "2", "--eval-size", "16", "--threads", "1",
                 "--model-config", json.dumps(TINY), *extra])


def test_train_then_resume_then_bench(tmp_path, capsys):
    assert run_train(tmp_path, "--steps", "2") == 0
    # more steps stretch the schedule: refused unless asked for
    assert run_train(tmp_path, "--steps", "4", "--resume") == 2
    assert "train_config.loop.total_steps 2 -> 4" in capsys.readouterr().err
    assert run_train(tmp_path, "--steps", "4", "--resume", "--override-config") == 0
    out = capsys.readouterr().out
    assert "resumed at step 2" in out and "14 nonstandard" in out
    history = [json.loads(line) for line in (tmp_path / "run/history.jsonl").open()]
    assert [h["step"] for h in history] == [2, 4]
    split = json.loads((tmp_path / "run/best/split.json").read_text())
    assert split["heldout_proteins"] == len(split["heldout_names"]) > 0

    out_json = tmp_path / "bench.json"
    assert main(["protein", "bench", "--model", str(tmp_path / "run/best"), "--limit", "6",
                 "--samplers", "confidence", "topk:k=12", "--json", str(out_json),
                 "--plot", str(tmp_path / "bench.png"), "--quiet", "--threads", "1"]) == 0
    assert (tmp_path / "bench.png").read_bytes()[:4] == b"\x89PNG"
    report = json.loads(out_json.read_text())
    rows = {r["label"]: r for r in report["rows"]}
    assert list(rows) == ["natural: training crops", "natural: held-out crops", "confidence",
                          "topk k=12"]
    lengths = np.random.default_rng([0, 4099]).integers(50, 101, 6)
    assert rows["confidence"]["nfe"] == pytest.approx(lengths.mean())
    assert rows["topk k=12"]["nfe"] == pytest.approx(np.ceil(lengths / 12).mean())
    for r in report["rows"]:
        assert 0 <= r["jsd_heldout"] <= np.log(2) and 0 <= r["low_complexity"] <= 1
    # natural crops are far closer to held-out composition than an untrained model's output
    assert rows["natural: held-out crops"]["jsd_2mer"] < rows["confidence"]["jsd_2mer"]
    # rates: every residue of a protein is decoded, one per pass or up to 12 per pass
    assert rows["confidence"]["revealed"] == lengths.mean()
    assert rows["confidence"]["tokens_per_pass"] == 1.0
    assert rows["topk k=12"]["tokens_per_pass"] == pytest.approx(
        lengths.mean() / np.ceil(lengths / 12).mean())
    for r in report["rows"]:
        assert r["n_items"] == 6 and r["closeness"] == 1.0 - r["jsd_heldout"]
        assert r["wall_per_solved"] is None  # generation solves no item
        if r["nfe"] is None:  # the natural crops decode nothing
            assert r["tokens_per_pass"] is None and r["sequences_per_token"] is None
        else:
            assert r["sequences_per_token"] == r["sequences"] / r["revealed"]
    score = aup([BenchRow.from_dict(r) for r in report["rows"]])
    assert score is not None and report["aup"] == score
    assert f"AUP over these rows: {score:.1f} " in capsys.readouterr().out


@pytest.mark.parametrize("args, field", [
    (["--limit", "0"], "--limit"),
    (["--max-length", "101"], "lengths"),
    (["--min-length", "60", "--max-length", "50"], "lengths"),
    (["--samplers", "topk:k=0"], "k"),
    (["--json", "/no/such/dir/x.json"], "--json"),
])
def test_bench_bad_input_exits_2(tmp_path, tiny_protein, args, field, capsys):
    tiny_protein.save_pretrained(tmp_path / "m")
    code = main(["protein", "bench", "--model", str(tmp_path / "m"), "--limit", "2", "--quiet",
                 "--no-natural", "--samplers", "topk:k=50", *args])
    assert code == 2
    assert field in capsys.readouterr().err


def test_train_on_a_bad_fasta_fails_cleanly_or_skips_with_counts(tmp_path, capsys):
    rng = np.random.default_rng(0)
    good = "".join(f">p{i}\n" + "".join(rng.choice(list("ACDEFGHIKLMNPQRSTVWY"), 120)) + "\n"
                   for i in range(30))
    fasta = tmp_path / "mixed.fa"
    fasta.write_text(good + ">bad\nMKVJJJ\n>empty\n>short\nMKV\n")
    assert run_train(tmp_path, "--fasta", str(fasta), "--steps", "1", "--eval-every", "1") == 0
    out = capsys.readouterr().out
    assert "27 training and 3 held-out" in out
    assert "skipped: 1 empty, 1 nonstandard, 1 short" in out
    garbage = tmp_path / "garbage.fa"
    garbage.write_text("hello\n")
    assert run_train(tmp_path, "--fasta", str(garbage), "--steps", "1", "--overwrite") == 2
    assert "before the first '>' header" in capsys.readouterr().err


def test_shipped_model_is_small_and_was_trained_without_the_held_out_proteins():
    from unmask.pretrained import pretrained_path
    from unmask.protein.data import load_split

    model = load_protein_model()
    assert isinstance(model, ProteinMDM) and model.max_length == 100
    folder = pretrained_path("protein")
    assert sum(f.stat().st_size for f in folder.iterdir()) < 5_000_000
    record = json.loads((folder / "split.json").read_text())
    split = load_split(None, record["heldout_fraction"], record["split_seed"])
    assert record["heldout_names"] == split.heldout_names
    # better than the held-out proteins' own unigram composition would be
    from unmask.protein.metrics import composition

    inputs, targets, masked = heldout_eval_set(split.heldout_sampler(), n=256)
    comp = composition(split.heldout)
    unigram = float(-np.log(comp[targets[masked].numpy()]).mean())
    assert masked_loss(model, inputs, targets, masked)["heldout_loss"] < unigram


def test_mi_labels_and_estimator_on_protein_contexts(tiny_protein, tmp_path, capsys):
    """`unmask mi label --task protein` probes held-out crops (PAD never probed) with the
    protein model, and the estimator trains and evaluates on those labels."""
    from unmask.mi import perturbation_mi
    from unmask.mi.label_files import read_labels
    from unmask.protein.data import label_contexts

    tiny_protein.save_pretrained(tmp_path / "m")
    labels = tmp_path / "labels"
    assert main(["mi", "label", "--task", "protein", "--model", str(tmp_path / "m"),
                 "--contexts", "3", "--mask-ratio", "0.05:0.1", "--shard-size", "2",
                 "--out", str(labels), "--seed", "5"]) == 0
    tensors, manifest = read_labels(labels)
    assert manifest["identity"]["task"] == "protein" and manifest["contexts"] == 3
    tokens = label_contexts(5, 0, 3, (0.05, 0.1))
    assert torch.equal(tensors["tokens"], tokens)
    pad = tokens == PAD_ID
    assert pad.any() and not tensors["masked"][pad].any()
    assert (tensors["mi"][pad] == 0).all() and (tensors["mi"].transpose(1, 2)[pad] == 0).all()
    want = perturbation_mi(tiny_protein, tokens, eps=1e-3)
    torch.testing.assert_close(tensors["mi"], want.mi.float(), atol=1e-5, rtol=0)
    # the estimator commands find the protein model through the labels' task
    est = tmp_path / "est"
    assert main(["mi", "train", "--labels", str(labels), "--model", str(tmp_path / "m"),
                 "--out", str(est), "--epochs", "2", "--marginals", "--held-out", "0.5"]) == 0
    cfg = json.loads((est / "best" / "config.json").read_text())["config"]
    assert cfg["marginal_size"] == 20
    assert main(["mi", "eval", "--labels", str(labels), "--model", str(tmp_path / "m"),
                 "--estimator", str(est / "best"), "--split", "all", "--json"]) == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert result["contexts"] == 3 and result["pairs"] > 0
    # proteins have no symmetry group to copy contexts by
    assert main(["mi", "train", "--labels", str(labels), "--model", str(tmp_path / "m"),
                 "--out", str(tmp_path / "est2"), "--augment", "2"]) == 2
    assert "no known symmetry" in capsys.readouterr().err
    # the shipped Sudoku model cannot read protein labels
    assert main(["mi", "eval", "--labels", str(labels), "--model", "sudoku",
                 "--estimator", str(est / "best")]) == 2
    assert "protein" in capsys.readouterr().err


def test_mi_guided_finds_the_shipped_protein_estimator():
    """`mi-guided` on the shipped protein model loads the estimator shipped for it (tied by
    fingerprint) and fills exactly the given lengths, several residues per pass."""
    model = load_protein_model()
    x = generation_inputs(np.array([50, 61]))
    from unmask import DecodeConfig, make_sampler

    res = decode(model, x, make_sampler("mi-guided", gamma=15.0), DecodeConfig(temperature=1.0))
    assert ((res.tokens < 20) == (x == MASK_ID)).all()
    assert (res.tokens[x == PAD_ID] == PAD_ID).all()
    assert (res.nfe < torch.tensor([50, 61])).all() and (res.nfe > 1).all()
