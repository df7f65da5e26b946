"""The one shard store under bench caches and MI label sets: a shard that does not hash to
its content sha256, or whose tensors are not the expected shapes and dtypes, is never
believed: it is recomputed with one warning line."""

import json
from pathlib import Path

import pytest
import torch

from unmask.bench.cache import RESULT_FIELDS, ShardCache
from unmask.bench.sweep import Run, sweep
from unmask.cli import main
from unmask.decode import DecodeConfig
from unmask.models import MDMTransformer
from unmask.parallel.shard_store import ShardError, ShardStore, parse_shard, shard_bytes
from unmask.samplers.spec import SamplerSpec
from unmask.sudoku import grid_to_tokens, load_set
from unmask.sudoku.train import sudoku_model_config


@pytest.fixture(autouse=True)
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    torch.manual_seed(0)
    path = tmp_path_factory.mktemp("model") / "tiny"
    MDMTransformer(sudoku_model_config(d_model=16, n_layers=1, n_heads=2, d_ff=32)
                   ).save_pretrained(path)
    return MDMTransformer.from_pretrained(path), path


def tensor_span(path: Path, name: str) -> tuple[int, int]:
    """The byte range of tensor ``name``'s data in safetensors file ``path``."""
    data = path.read_bytes()
    n = int.from_bytes(data[:8], "little")
    lo, hi = json.loads(data[8:8 + n])[name]["data_offsets"]
    return 8 + n + lo, 8 + n + hi


def flip_byte(path: Path, at: int) -> None:
    data = bytearray(path.read_bytes())
    data[at] ^= 0x10
    path.write_bytes(bytes(data))


def test_a_shard_checks_its_bytes_shapes_and_metadata():
    from safetensors.torch import save

    tensors = {"tokens": torch.arange(6).view(2, 3), "nfe": torch.tensor([3, 4])}
    data = shard_bytes(tensors, {"key": "k"})
    schema = {"tokens": (torch.int64, ("S", "N")), "nfe": (torch.int64, ("S",))}
    got, meta = parse_shard(data, schema, {"S": 2}, {"key": "k"})
    assert all(torch.equal(got[k], tensors[k]) for k in tensors) and meta["key"] == "k"
    cases = {
        "sha256": lambda: parse_shard(data[:-1] + bytes([data[-1] ^ 1])),
        "readable": lambda: parse_shard(b"not safetensors"),
        "shape": lambda: parse_shard(data, schema, {"S": 3}),
        "as torch.int64, not torch.float32": lambda: parse_shard(
            data, {**schema, "nfe": (torch.float32, ("S",))}),
        "lacks tensor 'steps'": lambda: parse_shard(
            data, {**schema, "steps": (torch.int64, ("S",))}),
        "key='k', not 'other'": lambda: parse_shard(data, meta={"key": "other"}),
        # a file without a digest is refused unless the caller checked its bytes itself
        "does not match its sha256": lambda: parse_shard(save(tensors)),
    }
    for needle, call in cases.items():
        with pytest.raises(ShardError, match=needle):
            call()
    assert parse_shard(save(tensors), schema, digest_required=False)[1] == {}


def _runs(x):
    return [Run(SamplerSpec.parse(s), x, DecodeConfig(), 3) for s in
            ("confidence", "eb:gamma=1.0,order=confidence+verify=0.01,prefixes=doubling")]


def test_a_corrupted_or_reshaped_bench_shard_is_decoded_again(tiny, tmp_path, capsys):
    model, x = tiny[0], grid_to_tokens(load_set("medium")[0][:4])
    truth = sweep(_runs(x), model, batch_size=2)
    cache = tmp_path / "c"
    sweep(_runs(x), model, batch_size=2, cache=cache)
    files = sorted(cache.glob("*.safetensors"))
    assert len(files) == 4
    capsys.readouterr()
    flip_byte(files[0], tensor_span(files[0], "nfe")[0])  # one byte of the nfe tensor
    # another shard's file: the right key, the wrong shapes (a self-consistent file)
    reshaped = {k: torch.zeros(3, 5, dtype=torch.int64) if k in ("tokens", "reveal_step")
                else torch.zeros(3, dtype=torch.float64 if k == "cumulative_entropy"
                                 else torch.int64) for k in RESULT_FIELDS}
    key = files[1].name.removesuffix(".safetensors")
    files[1].write_bytes(shard_bytes(reshaped, {"key": key, "seconds": "1.0",
                                                "fingerprint": "x"}))
    again = sweep(_runs(x), model, batch_size=2, cache=cache)
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 2 and all(line.startswith("warning: cache: ") for line in err)
    assert "does not match its sha256" in err[0] or "does not match its sha256" in err[1]
    assert any("of shape (3, 5)" in line for line in err)
    for (got, _), (want, _) in zip(again, truth, strict=True):
        assert all(torch.equal(getattr(got, k), getattr(want, k)) for k in RESULT_FIELDS)
    # both were rewritten: a third run reads every shard back without a word
    sweep(_runs(x), model, batch_size=2, cache=cache)
    assert capsys.readouterr().err == ""


def test_the_cache_key_is_the_whole_spec(tiny, tmp_path):
    """Entries that differ only in what presets used to carry outside the spec (the prefix
    scheme, max_draft) or in a hook modifier are different shards."""
    model, x = tiny[0], grid_to_tokens(load_set("medium")[0][:2])
    cache = ShardCache(tmp_path / "c", model.fingerprint(), "cpu")
    from unmask.bench.sweep import shards_of

    specs = ["eb:gamma=1.0+verify=0.01", "eb:gamma=1.0+verify=0.01,prefixes=doubling",
             "eb:gamma=1.0+verify=0.01,max_draft=4", "eb:gamma=1.0",
             "eb:gamma=1.0+remdm=0.05", "eb:gamma=1.0+remdm=0.05,strategy=cap"]
    keys = {cache.key(shards_of([Run(SamplerSpec.parse(s), x)], 2)[0]) for s in specs}
    assert len(keys) == len(specs)


def test_cli_bench_reports_the_true_mean_nfe_after_a_corrupted_shard(tiny, tmp_path, capsys):
    argv = ["sudoku", "bench", "--model", str(tiny[1]), "--set", "medium", "--limit", "4",
            "--batch-size", "4", "--samplers", "confidence", "--quiet", "--threads", "1",
            "--cache", str(tmp_path / "c")]
    assert main([*argv, "--json", str(tmp_path / "a.json")]) == 0
    first = json.loads((tmp_path / "a.json").read_text())
    (shard,) = (tmp_path / "c").glob("*.safetensors")
    capsys.readouterr()
    flip_byte(shard, tensor_span(shard, "nfe")[0])
    assert main([*argv, "--json", str(tmp_path / "b.json")]) == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "does not match its sha256" in err[0], err
    again = json.loads((tmp_path / "b.json").read_text())
    # sequential decoding takes one pass per blank: the true mean NFE is the mean blanks
    blanks = first["singles_reference"]["mean_blanks"]
    assert again["rows"][0]["nfe"] == first["rows"][0]["nfe"] == blanks


def test_a_store_refuses_a_file_in_place_of_its_folder(tmp_path):
    from unmask import UnmaskError

    (tmp_path / "f").write_text("")
    with pytest.raises(UnmaskError, match="cache: .* is not a folder"):
        ShardStore(tmp_path / "f", "cache")
