"""Hostile Hugging Face folders: code outside the folder, malformed ``auto_map``, pickled
weights, limits the tokenizer overstates. Each is refused in one line before any code runs, or
handled as documented."""

from __future__ import annotations

import json
import shutil

import pytest
import torch

from unmask.cli import main
from unmask.errors import UnmaskError
from unmask.models.auto import load_model


@pytest.fixture
def llada_copy(llada_dir, tmp_path):
    """A writable copy of the tiny LLaDA-style folder (code + auto_map)."""
    return shutil.copytree(llada_dir, tmp_path / "m")


@pytest.fixture
def evil(tmp_path, monkeypatch):
    """A module outside the model folder that records when it runs."""
    flag = tmp_path / "ran"
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "evil.py").write_text(
        f"open({str(flag)!r}, 'w').write('ran')\nclass Evil: pass\n")
    return tmp_path / "elsewhere" / "evil", flag


def _set_auto_map(folder, value, file="config.json"):
    meta = json.loads((folder / file).read_text())
    meta["auto_map"] = value
    (folder / file).write_text(json.dumps(meta))


def _refused(argv_folder, capsys, needle):
    code = main(["generate", "--model", str(argv_folder), "--trust-remote-code", "--prompt",
                 "the cat", "--gen-length", "4", "--threads", "1"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.count("\n") == 1 and err.startswith("error: ") and "Traceback" not in err
    assert needle in err, err
    return err


@pytest.mark.parametrize("key", ["AutoModel", "AutoModelForMaskedLM", "AutoConfig"])
def test_an_absolute_module_path_outside_the_folder_is_refused_and_never_runs(
        llada_copy, evil, capsys, key):
    module, flag = evil
    auto_map = json.loads((llada_copy / "config.json").read_text())["auto_map"]
    auto_map[key] = f"{module}.Evil"
    _set_auto_map(llada_copy, auto_map)
    _refused(llada_copy, capsys, "only code inside the folder is run")
    assert not flag.exists()


@pytest.mark.parametrize("ref", ["../elsewhere/evil.Evil", "..evil.Evil", "other/repo--evil.Evil",
                                 "sub.dir.evil.Evil", "evil", ".Evil", "evil.", 12])
def test_a_reference_that_is_not_module_dot_class_in_the_folder_is_refused(
        llada_copy, capsys, ref):
    auto_map = json.loads((llada_copy / "config.json").read_text())["auto_map"]
    auto_map["AutoModel"] = ref
    _set_auto_map(llada_copy, auto_map)
    _refused(llada_copy, capsys, "auto_map['AutoModel']")


@pytest.mark.parametrize("value", [["configuration_tinyllada.TinyLLaDAConfig"],
                                   "modeling_tinyllada.TinyLLaDAModel", 3, None])
def test_an_auto_map_that_is_not_an_object_is_one_line(llada_copy, capsys, value):
    _set_auto_map(llada_copy, value)
    _refused(llada_copy, capsys, "auto_map must be an object")


def test_a_code_file_that_links_outside_the_folder_is_refused(llada_copy, evil, capsys):
    module, flag = evil
    (llada_copy / "modeling_tinyllada.py").unlink()
    (llada_copy / "modeling_tinyllada.py").symlink_to(f"{module}.py")
    _refused(llada_copy, capsys, "link to outside the folder")
    assert not flag.exists()


def test_a_tokenizer_auto_map_outside_the_folder_is_refused(llada_copy, evil, capsys):
    module, flag = evil
    _set_auto_map(llada_copy, {"AutoTokenizer": [f"{module}.Evil", None]},
                  "tokenizer_config.json")
    _refused(llada_copy, capsys, "tokenizer_config.json auto_map")
    assert not flag.exists()


def test_a_tokenizer_that_runs_code_needs_trust_remote_code(bert_dir, tmp_path):
    folder = shutil.copytree(bert_dir, tmp_path / "b")
    (folder / "tokenization_x.py").write_text("class Tok: pass\n")
    _set_auto_map(folder, {"AutoTokenizer": ["tokenization_x.Tok", None]},
                  "tokenizer_config.json")
    with pytest.raises(UnmaskError, match="trust_remote_code"):
        load_model(folder)


def test_the_folder_loads_when_its_auto_map_is_inside(llada_copy):
    model = load_model(llada_copy, trust_remote_code=True)
    assert model.mask_id == 3


def test_pickled_weights_alone_are_read_without_running_code(bert_dir, tmp_path, capsys):
    """A folder whose only weights are ``pytorch_model.bin``: read with weights_only=True
    (transformers' own loader), never unpickled freely; a pickle that would run code is
    refused in one line."""
    from safetensors.torch import load_file

    folder = shutil.copytree(bert_dir, tmp_path / "p")
    state = load_file(folder / "model.safetensors")
    (folder / "model.safetensors").unlink()
    torch.save(state, folder / "pytorch_model.bin")
    model = load_model(folder)
    ref = load_model(bert_dir)
    tokens = torch.tensor([[2, 5, 4, 6, 3]])
    assert torch.equal(model(tokens).logits, ref(tokens).logits)

    class Boom:
        def __reduce__(self):
            return (print, ("unpickled",))

    torch.save({"x": Boom()}, folder / "pytorch_model.bin")
    code = main(["generate", "--model", str(folder), "--prompt", "the cat", "--gen-length",
                 "2", "--threads", "1"])
    out, err = capsys.readouterr()
    assert code == 2 and "unpickled" not in out
    assert err.count("\n") == 1 and "safetensors" in err and "Traceback" not in err


def test_the_smallest_stated_length_limit_holds(bert_dir, tmp_path, capsys):
    """A tokenizer that claims 512 tokens does not lift the model's 64 positions: a long
    prompt is refused in one line, and ``mi label`` writes nothing."""
    folder = shutil.copytree(bert_dir, tmp_path / "b")
    meta = json.loads((folder / "tokenizer_config.json").read_text())
    meta["model_max_length"] = 512
    (folder / "tokenizer_config.json").write_text(json.dumps(meta))
    assert load_model(folder).max_length == 64
    code = main(["generate", "--model", str(folder), "--prompt", " ".join(["cat"] * 70),
                 "--gen-length", "4", "--threads", "1"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "max_length 64" in err
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("the cat sat on the mat . " * 40)
    out = tmp_path / "labels"
    code = main(["mi", "label", "--model", str(folder), "--task", "text", "--text",
                 str(corpus), "--length", "100", "--contexts", "2", "--out", str(out),
                 "--threads", "1"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "max_length 64" in err
    assert not out.exists()


@pytest.mark.parametrize("data, needle", [(b"the cat \xff\xfe sat", "is not UTF-8 text"),
                                          (b"the cat\x00\x00 sat", "is not text")])
def test_a_binary_corpus_is_refused(bert_dir, tmp_path, capsys, data, needle):
    corpus = tmp_path / "corpus.bin"
    corpus.write_bytes(data * 50)
    out = tmp_path / "labels"
    code = main(["mi", "label", "--model", str(bert_dir), "--task", "text", "--text",
                 str(corpus), "--length", "16", "--contexts", "2", "--out", str(out),
                 "--threads", "1"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and needle in err, err
    assert not out.exists()


def test_a_vocabulary_size_mismatch_names_the_tensor_and_both_shapes(bert_dir, tmp_path,
                                                                      capsys):
    folder = shutil.copytree(bert_dir, tmp_path / "b")
    meta = json.loads((folder / "config.json").read_text())
    stored = meta["vocab_size"]
    meta["vocab_size"] = stored + 9
    (folder / "config.json").write_text(json.dumps(meta))
    code = main(["generate", "--model", str(folder), "--prompt", "the cat", "--gen-length",
                 "2", "--threads", "1"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "above report" not in err
    assert f"({stored}, 16)" in err and f"({stored + 9}, 16)" in err, err


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
@pytest.mark.parametrize("name", ["sudoku", "bert"])
@pytest.mark.parametrize("device", ["cuda", "cuda:3", "tpu", "nonsense", 7])
def test_an_unusable_device_is_one_unmask_error(bert_dir, name, device):
    with pytest.raises(UnmaskError, match="device"):
        load_model(bert_dir if name == "bert" else name, device=device)


@pytest.mark.parametrize("kwargs, field", [
    ({"prompts": 123}, "prompts"), ({"prompts": None}, "prompts"),
    ({"prompts": ["a", 3]}, "prompts"), ({"tokenizer": "bert"}, "tokenizer"),
    ({"gen_length": True}, "gen_length"), ({"gen_length": 4.0}, "gen_length"),
    ({"block_length": True}, "block_length"), ({"batch_size": True}, "batch_size"),
    ({"seed": "1"}, "seed"), ({"seed": 1.5}, "seed"), ({"model": 3}, "model"),
])
def test_generate_names_the_bad_argument(bert_dir, kwargs, field):
    from unmask.generate import generate

    args = {"model": load_model(bert_dir), "tokenizer": None, "prompts": ["the cat"],
            "gen_length": 4, **kwargs}
    with pytest.raises(UnmaskError, match=f"^{field}"):
        generate(args.pop("model"), args.pop("tokenizer"), args.pop("prompts"), **args)


@pytest.mark.parametrize("argv, needle", [
    (["infill", "--template", "[UNK] zebra <mask>"], "as [UNK] (outside the model's "
                                                      "vocabulary): 'zebra'"),
    (["generate", "--prompt", "the", "--gen-length", "8", "--block-length", "3"],
     "error: --block-length: 3 does not divide gen_length 8"),
    (["infill", "--template", "the <mask>", "--sampler", "confidence+corrector"],
     "text decoding (generate, infill) takes no corrector"),
    (["infill", "--template", "the <mask>", "--steps", "-4.0"],
     "argument --steps: expected an integer >= 1, got '-4.0'"),
    (["infill", "--template", "the <mask:²>"], "integer >= 1 (digits 0-9)"),
    (["infill", "--template", "the <mask:1000000000>"],
     "1000000000 masked positions exceed the model's max_length 64"),
])
def test_refusals_name_the_flag_and_the_part_at_fault(bert_dir, capsys, argv, needle):
    code = main([*argv, "--model", str(bert_dir), "--threads", "1"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and needle in err, err


def test_a_literal_unknown_token_keeps_the_check(bert_dir, capsys):
    """``[UNK]`` written in the template is the template's; it does not hide another."""
    assert main(["infill", "--model", str(bert_dir), "--template", "[UNK] the <mask>",
                 "--threads", "1"]) == 0


@pytest.mark.parametrize("kind", ["bert", "esm"])
def test_weights_past_the_config_are_one_line_and_nothing_before_it(tmp_path, capsys, kind):
    """No load report of transformers' before the refusal: stderr is the one line."""
    import transformers

    folder = tmp_path / kind
    if kind == "bert":
        cfg = transformers.BertConfig(vocab_size=12, hidden_size=8, num_hidden_layers=2,
                                      num_attention_heads=2, intermediate_size=16,
                                      max_position_embeddings=16, mask_token_id=4)
        transformers.BertForMaskedLM(cfg).save_pretrained(str(folder))
    else:
        cfg = transformers.EsmConfig(vocab_size=33, hidden_size=8, intermediate_size=16,
                                     num_hidden_layers=2, num_attention_heads=2,
                                     pad_token_id=1, mask_token_id=32,
                                     max_position_embeddings=40,
                                     position_embedding_type="rotary")
        transformers.EsmForMaskedLM(cfg).save_pretrained(str(folder))
    meta = json.loads((folder / "config.json").read_text())
    meta["num_hidden_layers"] = 1
    (folder / "config.json").write_text(json.dumps(meta))
    import subprocess
    import sys

    # a fresh process: transformers' logging is set once per process
    proc = subprocess.run([sys.executable, "-m", "unmask", "infill", "--model", str(folder),
                           "--template", "MKV<mask>", "--threads", "1"],
                          capture_output=True, text=True, timeout=300)
    err = proc.stderr
    assert proc.returncode == 2 and err.count("\n") == 1, err
    assert err.startswith("error: model: ") and proc.stdout == ""


@pytest.mark.parametrize("template, changed", [("The sät <mask>", "'The' as 'the'"),
                                               ("the sät <mask>", "'sät' as 'sat'"),
                                               ("the cat <mask>", None)])
def test_an_uncased_tokenizer_changing_the_context_is_said(bert_dir, capsys, template,
                                                           changed):
    assert main(["infill", "--model", str(bert_dir), "--template", template,
                 "--threads", "1"]) == 0
    err = capsys.readouterr().err
    if changed is None:
        assert err == ""
    else:
        assert err.count("\n") == 1 and err.startswith("warning: template 0:") and changed in err
