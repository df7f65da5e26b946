"""Property tests over hostile values on the Hugging Face surfaces: any ``auto_map`` JSON
value and any ``--model_args`` text either works or is one :class:`UnmaskError` line; no code
outside the folder ever runs."""

from __future__ import annotations

import json
import shutil

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from unmask.errors import UnmaskError
from unmask.models.hf import check_remote_code

SETTINGS = settings(max_examples=60, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture])

REF_PIECES = st.sampled_from(["modeling_tinyllada", "configuration_tinyllada", "..", "/", "/tmp",
                              "evil", "repo--x", ".", "TinyLLaDAModel", "", "a b", "\x00",
                              "~", "$HOME", "modeling_tinyllada.py"])
REFS = st.lists(REF_PIECES, min_size=1, max_size=4).map(".".join) | st.text(max_size=20)
JSON_LEAVES = st.none() | st.booleans() | st.integers() | REFS
AUTO_MAPS = st.recursive(JSON_LEAVES, lambda inner: st.lists(inner, max_size=3)
                         | st.dictionaries(st.sampled_from(["AutoModel", "AutoConfig",
                                                            "AutoModelForMaskedLM", "x"]),
                                           inner, max_size=3), max_leaves=6)


@pytest.fixture(scope="module")
def folder(llada_dir, tmp_path_factory):
    return shutil.copytree(llada_dir, tmp_path_factory.mktemp("prop") / "m")


@SETTINGS
@given(AUTO_MAPS)
def test_any_auto_map_is_inside_the_folder_or_one_line(folder, auto_map):
    """Accepted only when every reference is ``module.Class`` of a .py file in the folder."""
    try:
        runs = check_remote_code(folder, {"auto_map": auto_map}, trust_remote_code=True)
    except UnmaskError as e:
        assert "\n" not in str(e) and str(e).startswith("model: ")
        return
    refs = [r for v in (auto_map or {}).values() for r in (v if isinstance(v, list) else [v])
            if r is not None]
    assert runs == bool(refs)
    for ref in refs:
        module, _, name = ref.rpartition(".")
        assert module.isidentifier() and name.isidentifier()
        assert (folder / f"{module}.py").resolve().parent == folder.resolve()


KEYS = st.sampled_from(["gen_length", "steps", "block_length", "temperature", "seed",
                        "batch_size", "chat_template", "min_new_tokens", "sampler", "genlength",
                        "max_batch_size", "trust_remote_code"])
VALUES = st.sampled_from(["1", "0", "-1", "abc", "", "nan", "inf", "True", "false", "2.5",
                          "auto", "auto:4", "1e3", "None", "confidence", "eb:gamma=0.1"])


@SETTINGS
@given(st.dictionaries(KEYS, VALUES, max_size=4))
def test_any_model_args_are_typed_or_one_line(args):
    pytest.importorskip("lm_eval")
    from unmask.lm_eval_model import MODEL_ARGS, parse_model_args

    try:
        typed = parse_model_args({"pretrained": "x", **args})
    except UnmaskError as e:
        assert "\n" not in str(e) and str(e).startswith("model_args: ")
        return
    assert set(typed) <= set(MODEL_ARGS)
    for key in ("gen_length", "seed", "min_new_tokens", "batch_size"):
        if key in typed:
            assert isinstance(typed[key], int) and not isinstance(typed[key], bool)
            assert typed[key] >= (1 if key in ("gen_length", "batch_size") else 0)
    if "temperature" in typed:
        assert typed["temperature"] >= 0.0 and typed["temperature"] < float("inf")


@SETTINGS
@given(st.binary(max_size=64))
def test_any_bytes_as_a_corpus_are_text_or_one_line(tmp_path_factory, data):
    from unmask.text.labels import read_corpus

    path = tmp_path_factory.mktemp("corpus") / "c.txt"
    path.write_bytes(data)
    try:
        text, sha = read_corpus(path)
    except UnmaskError as e:
        assert "\n" not in str(e) and str(e).startswith("text: ")
        return
    assert text.encode("utf-8") == data and "\x00" not in text and len(sha) == 64


def test_json_round_trip_of_the_tested_folder(folder):
    """The folder the properties run against loads as it is (the properties are not vacuous)."""
    meta = json.loads((folder / "config.json").read_text())
    assert check_remote_code(folder, meta, trust_remote_code=True)


def _bert_folder(root, layers: int, seed: int):
    import torch
    import transformers

    cfg = transformers.BertConfig(vocab_size=12, hidden_size=8, num_hidden_layers=layers,
                                  num_attention_heads=2, intermediate_size=16,
                                  max_position_embeddings=16, mask_token_id=4)
    torch.manual_seed(seed)
    transformers.BertForMaskedLM(cfg).save_pretrained(str(root))
    return root


def _esm_folder(root, layers: int, seed: int):
    import torch
    import transformers

    cfg = transformers.EsmConfig(vocab_size=33, hidden_size=8, intermediate_size=16,
                                 num_hidden_layers=layers, num_attention_heads=2,
                                 max_position_embeddings=40, pad_token_id=1, mask_token_id=32,
                                 position_embedding_type="absolute")
    torch.manual_seed(seed)
    transformers.EsmForMaskedLM(cfg).save_pretrained(str(root))
    return root


@settings(max_examples=8, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(kind=st.sampled_from(["bert", "esm"]), stored=st.integers(1, 3),
       declared=st.integers(1, 3), seed=st.integers(0, 3))
@example(kind="bert", stored=2, declared=1, seed=0)
@example(kind="esm", stored=3, declared=2, seed=0)
def test_weights_holding_more_or_less_than_the_config_are_one_line(
        tmp_path_factory, kind, stored, declared, seed):
    """Weights of ``stored`` layers under a config declaring ``declared``: they load only
    when the two agree; more layers than declared is refused as fewer is (never a truncated
    model with exit 0)."""
    from unmask.models.auto import load_model

    folder = (_bert_folder if kind == "bert" else _esm_folder)(
        tmp_path_factory.mktemp(kind) / "m", stored, seed)
    meta = json.loads((folder / "config.json").read_text())
    meta["num_hidden_layers"] = declared
    (folder / "config.json").write_text(json.dumps(meta))
    try:
        model = load_model(folder)
    except UnmaskError as e:
        assert "\n" not in str(e) and str(e).startswith("model: ")
        assert declared != stored
        if declared < stored and kind == "bert":  # (ESM's contact head changes shape too)
            assert f"layer.{declared}." in str(e) and "does not imply" in str(e)
        return
    assert declared == stored
    assert model is not None


@SETTINGS
@given(args=st.dictionaries(st.sampled_from(["pretrained", "batch_size", "device", "seed",
                                             "gen_length", "dtype"]),
                            st.sampled_from(["1", "2", "cpu", "auto", "", "x"]) | st.integers(
                                -1, 4) | st.none(), max_size=4),
       extra=st.dictionaries(st.sampled_from(["batch_size", "device", "max_batch_size"]),
                             st.sampled_from([None, 1, "auto", "cpu", "cuda"]), max_size=3))
def test_lm_eval_builds_the_model_from_any_arg_obj_or_one_line(tmp_path_factory, args, extra):
    """lm-eval's command line calls ``create_from_arg_obj``: no ``pretrained``, a key in both
    dicts (``device``, ``batch_size``) end in one line, never a TypeError."""
    pytest.importorskip("lm_eval")
    from unmask.lm_eval_model import UnmaskLM

    if "pretrained" in args:
        args["pretrained"] = str(tmp_path_factory.mktemp("none") / "missing")
    with pytest.raises(UnmaskError) as e:  # no model at that path: refused at the latest there
        UnmaskLM.create_from_arg_obj(args, extra)
    line = str(e.value)
    assert "\n" not in line and line.startswith(("model_args: ", "model: ", "device: ", "dtype: "))
    if "pretrained" not in args:
        assert "pretrained=DIR" in line or line.startswith("model_args: ")


def test_lm_eval_arg_obj_with_keys_in_both_places(llada_dir):
    pytest.importorskip("lm_eval")
    from unmask.lm_eval_model import UnmaskLM

    lm = UnmaskLM.create_from_arg_obj(
        {"pretrained": str(llada_dir), "trust_remote_code": True, "batch_size": 2,
         "device": "cpu", "gen_length": 4}, {"batch_size": 1, "device": "cpu"})
    assert lm.batch_size == 2 and lm.request.gen_length == 4
    with pytest.raises(UnmaskError, match="model_args: gen_length given twice"):
        UnmaskLM.create_from_arg_string(f"pretrained={llada_dir},gen_length=4,gen_length=8")


@settings(max_examples=5, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(positions=st.integers(6, 40), absolute=st.booleans(), extra=st.integers(-3, 3))
@example(positions=64, absolute=True, extra=1)
@example(positions=64, absolute=True, extra=2)
def test_an_esm_template_at_any_length_fills_or_is_one_line(tmp_path_factory, positions,
                                                            absolute, extra):
    """A template of the model's max_length (+ extra) residues: filled up to max_length,
    refused in one line beyond it, never an IndexError (absolute position embeddings count
    <cls>, <eos> and ESM's position offset)."""
    import transformers

    from unmask.infill import infill
    from unmask.models.auto import load_model

    cfg = transformers.EsmConfig(vocab_size=33, hidden_size=8, intermediate_size=16,
                                 num_hidden_layers=1, num_attention_heads=2, pad_token_id=1,
                                 mask_token_id=32, max_position_embeddings=positions,
                                 position_embedding_type="absolute" if absolute else "rotary")
    folder = tmp_path_factory.mktemp("esm") / "m"
    transformers.EsmForMaskedLM(cfg).save_pretrained(str(folder))
    model = load_model(folder)
    assert model.max_length == positions - (4 if absolute else 2)
    length = max(model.max_length + extra, 1)
    template = "A" * (length - 1) + "<mask>"
    try:
        (g,) = infill(model, template)
    except UnmaskError as e:
        assert length > model.max_length and "max_length" in str(e) and "\n" not in str(e)
        return
    assert length <= model.max_length and len(g.text) == length
