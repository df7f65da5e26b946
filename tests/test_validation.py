"""The one validation layer (unmask.validation) and the checks built on it: sampler parameters,
config files, --model-config overrides, lm-eval's --model_args and the CLI's argument types."""


import dataclasses
import typing

import numpy as np
import pytest

from unmask import UnmaskError
from unmask.validation import (
    InvalidText,
    bool_text,
    describe,
    field_problem,
    finite_float,
    int_at_least,
    is_bool,
    is_int,
    is_number,
    json_type,
    matches,
    one_of,
    optional,
    parse_text_args,
    plain,
)


def test_predicates_count_numpy_scalars_and_never_a_bool():
    for value in (3, np.int64(3), np.uint8(3)):
        assert is_int(value) and is_number(value) and not is_bool(value)
    for value in (2.5, np.float32(2.5), np.float64(2.5)):
        assert is_number(value) and not is_int(value)
    for value in (True, False, np.bool_(True)):
        assert is_bool(value) and not is_int(value) and not is_number(value)
    for value in ("3", None, [3], 3j):
        assert not is_int(value) and not is_number(value) and not is_bool(value)


def test_plain_makes_numpy_scalars_python_ones():
    assert [type(plain(v)) for v in (np.int32(4), np.float32(0.5), np.bool_(False))] == \
        [int, float, bool]
    assert plain(np.int32(4)) == 4 and plain(np.float32(0.5)) == 0.5
    assert plain("x") == "x" and plain(None) is None


@pytest.mark.parametrize("value, hint, ok", [
    (3, int, True), (3.0, int, False), (True, int, False), ("3", int, False),
    (3, float, True), (0.5, float, True), (False, float, False), ("0.5", float, False),
    (True, bool, True), (1, bool, False), ("x", str, True), (1, str, False),
    (None, int | None, True), (None, int, False),
    (None, typing.Union[float, None], True),  # noqa: UP007  (the form older hints take)
    ([1, 2], list[int], True), ([1, True], list[int], False), ((1, 2), list[int], False),
    ([], list[int], True), ({"a": 1}, dict, True), ([1], dict, False),
    ("anything", object, True), (object(), typing.Any, True),
])
def test_matches_reads_a_type_hint(value, hint, ok):
    assert matches(value, hint) is ok


def test_describe_names_scalar_hints_as_messages_do():
    assert describe(int) == "an integer"
    assert describe(float | None) == "a number or None"
    assert describe(bool) == "True or False"
    assert json_type(True) == "a boolean" and json_type("1") == "a string"
    assert json_type(None) == "null" and json_type([1]) == "a list"


@dataclasses.dataclass
class _Config:
    size: int
    rate: float = 0.1
    name: str | None = None
    ids: list[int] = dataclasses.field(default_factory=list)


def test_field_problem_reports_unknown_then_missing_then_type_in_field_order():
    assert field_problem(_Config, {"size": 2, "rate": 1, "ids": [1]}) is None
    p = field_problem(_Config, {"zeta": 1, "alpha": 2, "size": "x"})
    assert (p.kind, p.key, p.hint) == ("unknown", "alpha", None)
    p = field_problem(_Config, {"rate": 0.5})
    assert (p.kind, p.key) == ("missing", "size")
    p = field_problem(_Config, {"ids": ["1"], "size": True})
    assert (p.kind, p.key, p.hint) == ("type", "size", int)
    # partial: overrides of some fields, a required field may be absent
    assert field_problem(_Config, {"rate": 0.5}, partial=True) is None
    p = field_problem(_Config, {"ids": [1, 2.5]}, partial=True)
    assert (p.kind, p.key) == ("type", "ids")


def test_argument_types_refuse_in_one_line():
    at_least_2 = int_at_least(2)
    assert at_least_2("7") == 7
    for text, message in (("x", "expected an integer >= 2, got 'x'"), ("1", "must be >= 2, got 1")):
        with pytest.raises(InvalidText, match=message):
            at_least_2(text)
    unit = finite_float(0.0, 1.0, open_low=True)
    assert unit("1") == 1.0
    for text, message in (("0", "must be > 0, got 0"), ("nan", "must be a finite number"),
                          ("2", "must be <= 1, got 2"), ("a", "expected a number")):
        with pytest.raises(InvalidText, match=message):
            unit(text)
    assert [bool_text(t) for t in ("YES", "0", " true ")] == [True, False, True]
    with pytest.raises(InvalidText, match="expected true or false, got 'y'"):
        bool_text("y")
    assert one_of("a", "b")("b") == "b"
    with pytest.raises(InvalidText, match="expected a or b, got 'c'"):
        one_of("a", "b")("c")
    assert optional(at_least_2)("None") is None and optional(at_least_2)("3") == 3


def test_the_command_line_types_are_the_same_checks_as_argparse_refusals():
    import argparse

    from unmask.commands.flags import types

    with pytest.raises(argparse.ArgumentTypeError, match="^must be >= 2, got 1$"):
        types.int_at_least(2)("1")
    with pytest.raises(argparse.ArgumentTypeError, match="^must be < 2\\*\\*63"):
        types.seed_int(str(2**63))
    assert (types.positive_int("3"), types.finite_float(0.0)("0.5")) == (3, 0.5)
    assert types.positive_int.__name__ == "integer >= 1"  # argparse names a type by it


def test_parse_text_args_types_each_key_and_names_the_bad_one():
    parsers = {"n": int_at_least(1), "flag": bool_text}
    assert parse_text_args({"n": 3, "flag": "no"}, parsers, "opts") == {"n": 3, "flag": False}
    with pytest.raises(UnmaskError) as e:
        parse_text_args({"n": "0"}, parsers, "opts")
    assert str(e.value) == "opts: n: must be >= 1, got 0"
    with pytest.raises(UnmaskError) as e:
        parse_text_args({"m": "1"}, parsers, "opts")
    assert str(e.value) == "opts: unknown key 'm'; accepted: n, flag"


# ------------------------------------------------------------------ the layers built on it


def test_every_sampler_built_directly_is_typed_like_make_sampler():
    """A registered sampler's own constructor refuses True for a number and a string for a
    number, with make_sampler's message, and makes numpy scalars Python ones (before, only
    make_sampler checked: ``TopK(k=True)`` decoded one position per step)."""
    import unmask.samplers  # noqa: F401  (registers every sampler)
    from unmask.samplers.base import _REGISTRY, make_sampler
    from unmask.validation import union_options

    checked = 0
    for name, cls in sorted(_REGISTRY.items()):
        hints = typing.get_type_hints(cls)
        for f in dataclasses.fields(cls):
            options = union_options(hints[f.name])
            if int not in options and float not in options:
                continue
            for bad in (True, "1"):
                with pytest.raises(UnmaskError) as direct:
                    cls(**{f.name: bad})
                with pytest.raises(UnmaskError) as made:
                    make_sampler(name, **{f.name: bad})
                assert str(direct.value) == str(made.value)
                assert str(direct.value).startswith(f"sampler {name!r}: {f.name}: expected ")
            checked += 1
    assert checked >= 20
    sampler = _REGISTRY["topk"](k=np.int64(3))
    assert sampler.k == 3 and type(sampler.k) is int


def test_config_overrides_check_types_and_name_unknown_fields():
    from unmask.commands.flags.training import check_config_overrides

    check_config_overrides({"n_layers": 2, "dropout": 0, "real_token_ids": [1, 2]}, "--mc")
    cases = [({"d_model": "128"}, "--mc: d_model must be int, got a string '128'"),
             ({"relation_bias": 1}, "--mc: relation_bias must be bool, got an integer 1"),
             ({"real_token_ids": [1, True]},
              "--mc: real_token_ids must be list, got a list [1, True]")]
    for overrides, message in cases:
        with pytest.raises(UnmaskError) as e:
            check_config_overrides(overrides, "--mc")
        assert str(e.value) == message
    with pytest.raises(UnmaskError) as e:
        check_config_overrides({"d_model": "x", "depth": 3}, "--mc")
    assert str(e.value).startswith("--mc: unknown field 'depth'; fields: vocab_size, mask_id")


def test_config_file_fields_keep_their_one_line_messages():
    from unmask.models.files import dataclass_from_dict

    assert dataclass_from_dict(_Config, {"size": 2}, "f.json") == _Config(size=2)
    cases = [([], "model: f.json: expected an object, got list"),
             ({"size": 1, "bad": 2}, "model: f.json: unknown key 'bad'"),
             ({}, "model: f.json: missing key 'size'"),
             ({"size": "128"}, "model: f.json: 'size' must be of type int, got \"128\""),
             ({"size": 1, "rate": True}, "model: f.json: 'rate' must be of type float, got "
                                         "true")]
    for data, message in cases:
        with pytest.raises(UnmaskError) as e:
            dataclass_from_dict(_Config, data, "f.json")
        assert str(e.value) == message


def _tiny_transformer():
    from unmask.models.transformer import MDMTransformer, TransformerConfig

    return MDMTransformer(TransformerConfig(vocab_size=4, mask_id=3, max_length=4,
                                            real_token_ids=[0, 1, 2], d_model=8, n_layers=1,
                                            n_heads=2, d_ff=8))


@pytest.mark.parametrize("where, args, kwargs, message", [
    ("unmask.corrector:CorrectorConfig", (), dict(hidden_size=True, vocab_size=4,
                                                  real_token_ids=[0]), "hidden_size: must be"),
    ("unmask.mi.estimator:EstimatorConfig", (), dict(hidden_size=8, layer=True), "layer"),
    ("unmask.mi.estimator:EstimatorConfig", (), dict(hidden_size=8, extra_layers=(1, True)),
     "extra_layers"),
    ("unmask.image.classifier:ClassifierConfig", (), dict(channels=True),
     "channels: must be an integer >= 1, got True"),
    ("unmask.arithmetic.format:EquationFormat", (), dict(a_digits=True), "a_digits"),
    ("unmask.reasoning.train:TextModelConfig", (), dict(layers=True),
     "layers: must be an integer >= 1, got True"),
    ("unmask.parallel.workers:RayEngine", (2,), dict(cpus_per_worker=True),
     "cpus_per_worker: must be an integer >= 1, got True"),
    ("unmask.mi.labels:write_labels", (None, "unused"), dict(contexts=True),
     "contexts: must be an integer >= 1, got True"),
    ("unmask.mi.labels:write_labels", (None, "unused"), dict(contexts=1, batch_size=True),
     "batch_size: must be an integer >= 1, got True"),
    ("unmask.mi.labels:write_labels", (None, "unused"), dict(contexts=1, shard_size=True),
     "shard_size: must be >= 1, got True"),
    ("unmask.mi.labels:write_labels", (None, "unused"), dict(contexts=1, top_k=True),
     "top_k: must be None or an integer >= 1, got True"),
    ("unmask.bench.sweep:shards_of", ([], True), {},
     "batch_size: must be an integer >= 1, got True"),
    ("unmask.reasoning.bench:run_bench", (None, [], []), dict(limit=True),
     "limit: must be an integer >= 1, got True"),
])
def test_a_bool_is_no_count(where, args, kwargs, message):
    """Checks that read ``isinstance(x, int)`` took True for 1; they go through is_int now."""
    import importlib

    module, name = where.split(":")
    with pytest.raises(UnmaskError, match=message):
        getattr(importlib.import_module(module), name)(*args, **kwargs)


def test_a_model_is_not_deepened_true_times():
    with pytest.raises(UnmaskError, match="factor"):
        _tiny_transformer().deepened(True)
