"""Bench sweeps on an engine: the same shards and rows whatever the engine (in order, seeds per
item), workers load the model by recipe and are checked against the driver's; bad engine input
is one line."""

import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

import unmask
from unmask import UnmaskError
from unmask.bench.contract import BenchRow
from unmask.bench.recipe import ModelRecipe
from unmask.bench.sweep import Run, shards_of, sweep
from unmask.cli import main
from unmask.corrector import Corrector, CorrectorConfig
from unmask.decode import DecodeConfig, decode
from unmask.hooks import corrector_hooks
from unmask.image.bench import run_bench as run_image_bench
from unmask.image.classifier import DigitClassifier
from unmask.image.model import load_digits_model
from unmask.models import MDMTransformer
from unmask.models.auto import load_model
from unmask.models.toy import ExactJointMDM
from unmask.parallel.shard_store import parse_shard
from unmask.parallel.workers import Engine, LocalEngine, RayEngine
from unmask.samplers.spec import SamplerSpec
from unmask.sudoku import grid_to_tokens, load_set
from unmask.sudoku.bench import run_bench as bench_sudoku
from unmask.sudoku.train import sudoku_model_config

SRC = str(Path(unmask.__file__).resolve().parents[1])
WALL = {"wall_s", "puzzles_per_s", "wall_per_solved", "proteins_per_s", "ms_per_step"}
SPECS = ["confidence", "eb:gamma=0.1,order=confidence+verify=0.002"]


def _tiny_dir(root: Path, seed: int) -> Path:
    torch.manual_seed(seed)
    path = root / f"tiny{seed}"
    MDMTransformer(sudoku_model_config(d_model=16, n_layers=1, n_heads=2, d_ff=32)
                   ).save_pretrained(path)
    return path


@pytest.fixture(autouse=True)
def one_thread():
    """One torch thread, as each Ray worker (1 CPU) runs: the same floating-point sums as the
    workers', and no oversubscribed cores."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """(the model, its folder)."""
    path = _tiny_dir(tmp_path_factory.mktemp("model"), 0)
    return MDMTransformer.from_pretrained(path), path


@pytest.fixture(scope="module")
def digits(tiny_digits):
    return tiny_digits


@pytest.fixture(scope="module")
def puzzles():
    return load_set("medium")[0][:5]


class Reversed(Engine):
    """A non-local engine in this process: one worker, jobs run last first (so a sweep must
    put results back in order, and the workers' path, recipe and fingerprint check, runs)."""

    name = "reversed"

    def open(self, setup):
        self.state = setup()

    def call(self, fn, arg=None):
        return fn(self.state, arg)

    def map_unordered(self, fn, jobs):
        for k in reversed(range(len(jobs))):
            yield k, fn(self.state, jobs[k])

    def close(self):
        self.state = None


def _rows(rows: list[BenchRow]) -> list[dict]:
    return _file_rows([r.to_dict() for r in rows])


def _file_rows(rows: list[dict]) -> list[dict]:
    """A bench file's rows without their wall-clock fields."""
    return [{k: v for k, v in r.items() if k not in WALL} for r in rows]


def _bench(model, puzzles, **kw):
    entries = [SamplerSpec.parse(s) for s in SPECS]
    return bench_sudoku(model, puzzles, entries, seed=3, batch_size=2,
                        config=DecodeConfig(temperature=0.7), **kw)


# --- one set of shards, results in order ------------------------------------------------------

def test_the_local_sweep_is_the_loop_over_entries_and_chunks(tiny, puzzles):
    model = tiny[0]
    x = grid_to_tokens(puzzles)
    cfg = DecodeConfig(temperature=1.0)
    entries = [SamplerSpec.parse(s) for s in SPECS]
    done = []
    results = sweep([Run(e, x, cfg, seed=11) for e in entries], model, batch_size=2,
                    progress=done.append)
    assert done == [1, 2]
    for entry, (res, wall) in zip(entries, results, strict=True):
        chunks = [decode(model, x[i:i + 2], entry.build(), cfg, seed=11 + i)
                  for i in range(0, 5, 2)]
        assert torch.equal(res.tokens, torch.cat([c.tokens for c in chunks]))
        assert torch.equal(res.nfe, torch.cat([c.nfe for c in chunks]))
        assert torch.equal(res.cumulative_entropy,
                           torch.cat([c.cumulative_entropy for c in chunks]))
        assert wall > 0
    assert [(s.run, s.start, len(s.tokens)) for s in shards_of(
        [Run(e, x, cfg) for e in entries], 2)] == [(0, 0, 2), (0, 2, 2), (0, 4, 1),
                                                   (1, 0, 2), (1, 2, 2), (1, 4, 1)]


def test_item_seeds_do_not_depend_on_the_split():
    """Identical all-masked rows sampled at temperature 1 from an exact model: the rows
    differ from each other (each item has its own seed) and not with the shard size."""
    model = ExactJointMDM(n=6, v=3, seed=2)
    x = torch.full((8, 6), model.mask_id, dtype=torch.long)
    runs = [Run(SamplerSpec.parse("topk:k=2"), x, DecodeConfig(temperature=1.0), seed=40)]
    tokens = [sweep(runs, model, batch_size=b)[0][0].tokens for b in (1, 3, 8)]
    assert len({tuple(t.tolist()) for t in tokens[0]}) > 1
    assert torch.equal(tokens[0], tokens[1]) and torch.equal(tokens[0], tokens[2])


def test_workers_load_the_model_by_recipe_and_rows_come_back_in_order(tiny, puzzles):
    local = _bench(tiny[0], puzzles)
    remote = _bench(tiny[0], puzzles, engine=Reversed(),
                    recipe=ModelRecipe(str(tiny[1]), task="sudoku"))
    assert [r.label for r in remote] == [e.label for e in map(SamplerSpec.parse, SPECS)]
    assert _rows(remote) == _rows(local)


def test_image_bench_workers_load_the_digits_model_by_its_loader(digits):
    """The digits MDM is not a model load_model builds: its recipe names a loader, and the
    rows match the local engine's (every run, two temperatures, in order)."""
    model = load_digits_model(digits / "mdm")
    clf = DigitClassifier.from_pretrained(digits / "clf")
    entries = [SamplerSpec.parse(s) for s in ("confidence", "topk:k=16", "topk:k=64+verify")]

    def bench(**kw):
        rows, _, samples = run_image_bench(model, clf, entries, n=6, temperatures=(0.0, 1.0),
                                           rounds=3, **kw)
        return _rows(rows), samples

    local_rows, local_samples = bench()
    rows, samples = bench(engine=Reversed(), recipe=ModelRecipe(str(digits / "mdm"),
                                                                loader=load_digits_model))
    assert [r["label"] for r in rows] == [f"{e.label} T={t}" for t in (0, 1) for e in entries]
    assert rows == local_rows
    assert all(torch.equal(samples[k], local_samples[k]) for k in local_samples)
    with pytest.raises(UnmaskError, match="not an mdm-transformer config|no config.json"):
        ModelRecipe(str(digits / "clf"), loader=load_digits_model).load()


class Killed(LocalEngine):
    """The local engine, killed (an exception) after ``after`` shards; counts the shards it
    decoded."""

    def __init__(self, after: int | None = None):
        super().__init__()
        self.after, self.decoded = after, 0

    def map_unordered(self, fn, jobs):
        for k, out in super().map_unordered(fn, jobs):
            if self.after is not None and self.decoded == self.after:
                raise KeyboardInterrupt
            self.decoded += 1
            yield k, out


def _cached_runs(model, x, seed=5):
    return [Run(SamplerSpec.parse(s), x, DecodeConfig(temperature=0.7), seed) for s in SPECS]


def _same(got, want, seconds=True):
    for (g, gs), (w, ws) in zip(got, want, strict=True):
        assert all(torch.equal(getattr(g, k), getattr(w, k)) for k in
                   ("tokens", "nfe", "sequences", "steps", "cumulative_entropy", "reveal_step"))
        assert g.stats.keys() == w.stats.keys()
        assert all(torch.equal(g.stats[k], w.stats[k]) for k in g.stats)
        assert gs == ws or not seconds


def test_a_killed_sweep_resumes_from_its_cache_and_gives_the_same_results(tiny, puzzles,
                                                                          tmp_path):
    model, x = tiny[0], grid_to_tokens(puzzles)  # 2 runs x 3 shards of 2 puzzles
    plain = sweep(_cached_runs(model, x), model, batch_size=2)
    with pytest.raises(KeyboardInterrupt):
        sweep(_cached_runs(model, x), model, batch_size=2, engine=Killed(after=4),
              cache=tmp_path / "c")
    assert len(list((tmp_path / "c").glob("*.safetensors"))) == 4
    resumed = Killed()
    first = sweep(_cached_runs(model, x), model, batch_size=2, engine=resumed,
                  cache=tmp_path / "c")
    assert resumed.decoded == 2
    _same(first, plain, seconds=False)
    again = Killed(after=0)  # everything kept: nothing is decoded, not even opened
    _same(sweep(_cached_runs(model, x), model, batch_size=2, engine=again,
                cache=tmp_path / "c"), first)
    # another seed, other settings or other tokens are other shards
    for runs in (_cached_runs(model, x, seed=6),
                 [Run(r.entry, r.tokens, DecodeConfig(), r.seed) for r in _cached_runs(model, x)],
                 _cached_runs(model, x.flip(0))):
        fresh = Killed()
        sweep(runs, model, batch_size=2, engine=fresh, cache=tmp_path / "c")
        assert fresh.decoded == 6


def test_cache_keeps_no_corrected_shard_without_a_recipe_and_refuses_a_foreign_file(
        tiny, puzzles, tmp_path):
    model, x = tiny[0], grid_to_tokens(puzzles[:2])
    runs = [Run(SamplerSpec.parse("topk:k=5+corrector"), x)]
    hooks = corrector_hooks(Corrector(CorrectorConfig.for_model(model, d=8, n_heads=2,
                                                                layers=1)).eval())
    sweep(runs, model, hooks=hooks, cache=tmp_path / "c")
    assert not list((tmp_path / "c").glob("*.safetensors"))
    sweep(_cached_runs(model, x)[:1], model, cache=tmp_path / "c")
    (kept,) = (tmp_path / "c").glob("*.safetensors")
    good = parse_shard(kept.read_bytes())[0]
    kept.write_bytes(b"not safetensors")  # never believed: decoded again and rewritten
    sweep(_cached_runs(model, x)[:1], model, cache=tmp_path / "c")
    again = parse_shard(kept.read_bytes())[0]
    assert all(torch.equal(again[k], good[k]) for k in good)
    (tmp_path / "f").write_text("")
    with pytest.raises(UnmaskError, match="cache: .* is not a folder"):
        sweep(_cached_runs(model, x)[:1], model, cache=tmp_path / "f")


@pytest.mark.parametrize("bench", ["sudoku", "image", "antibody"])
def test_cli_bench_with_a_cache_reruns_from_it(bench, tiny, digits, tmp_path, capsys):
    """A second run with the same flags and --cache reads every shard back: the JSON is
    byte-equal, wall-clock fields included (a decode would time itself anew)."""
    argv = {"sudoku": ["sudoku", "bench", "--model", str(tiny[1]), "--set", "medium",
                       "--limit", "4", "--batch-size", "2", "--samplers", *SPECS],
            "image": ["image", "bench", "--model", str(digits / "mdm"), "--classifier",
                      str(digits / "clf"), "--limit", "4", "--rounds", "3", "--samplers",
                      "confidence", "topk:k=16"],
            "antibody": ["antibody", "bench", "--model", "protein", "--limit", "3",
                         "--batch-size", "2", "--settings", "cdr", "random", "--samplers",
                         "topk:k=4", "eb", "--no-perplexity"]}[bench]
    if bench == "antibody":
        pytest.importorskip("anarci")
    cache = tmp_path / "cache"
    first = _cli_rows([*argv, "--cache", str(cache)], tmp_path / "a.json")
    kept = sorted(cache.glob("*.safetensors"))
    # sudoku: 2 entries x 2 shards; image: 2 entries; antibody: 2 settings x 2 entries x 2
    assert len(kept) == {"sudoku": 4, "image": 2, "antibody": 8}[bench]
    again = _cli_rows([*argv, "--cache", str(cache)], tmp_path / "b.json")
    assert again == first and sorted(cache.glob("*.safetensors")) == kept
    capsys.readouterr()
    assert main([*argv, "--quiet", "--cache", str(tmp_path / "a.json")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "argument --cache:" in err and "not a folder" in err


def _text_folder(root: Path) -> Path:
    """A tiny random text MDM with its character tokenizer, saved under ``root``."""
    from unmask.reasoning.tokenizer import char_tokenizer
    from unmask.reasoning.train import TextModelConfig, text_mdm

    path, tok = root / "text", char_tokenizer(640)
    torch.manual_seed(0)
    text_mdm(tok, TextModelConfig(hidden_size=16, layers=1, heads=2, ff_size=32,
                                  max_length=640)).save_pretrained(path)
    tok.save_pretrained(path)
    return path


def test_reasoning_bench_on_an_engine_gives_solve_problem_by_problem(tmp_path):
    """Every batch of problems is a sweep run: on a non-local engine the rows equal the local
    ones, and each problem's outcome and passes are those of :func:`solve`'s batches."""
    pytest.importorskip("reasoning_gym")
    from unmask.reasoning.bench import run_bench as run_reasoning_bench
    from unmask.reasoning.bench import solve
    from unmask.reasoning.tasks import get_tasks

    path = _text_folder(tmp_path)
    model = load_model(path, task="text")
    tasks, entries = get_tasks(["chain_sum", "countdown"]), [SamplerSpec.parse("confidence"),
                                                             SamplerSpec.parse("topk:k=4")]
    local = run_reasoning_bench(model, tasks, entries, limit=34, temperatures=(1.0,))
    remote = run_reasoning_bench(model, tasks, entries, limit=34, temperatures=(1.0,),
                                 engine=Reversed(), recipe=ModelRecipe(str(path), task="text"))
    assert _rows(remote) == _rows(local)
    by = {(r.label, r.columns["task"]): r for r in local}
    for task in tasks:  # 34 problems: batches of 32 and 2
        for entry in entries:
            solved = solve(model, task, task.items(34, 0), entry.build(), temperature=1.0)
            row = by[(entry.label, task.name)]
            assert row.columns["solved_each"] == "".join("1" if s.correct else "0"
                                                         for s in solved)
            assert row.nfe == pytest.approx(sum(s.nfe for s in solved) / 34)
            assert row.sequences == pytest.approx(sum(s.sequences for s in solved) / 34)


def test_a_worker_with_other_weights_or_no_recipe_is_refused(tiny, puzzles, tmp_path):
    other = _tiny_dir(tmp_path, 1)
    with pytest.raises(UnmaskError, match=r"^model: a worker loaded weights \w+, not the "
                                          r"driver's \w+; every worker must read the same"):
        _bench(tiny[0], puzzles, engine=Reversed(), recipe=ModelRecipe(str(other)))
    with pytest.raises(UnmaskError, match="^recipe: the reversed engine's workers load"):
        _bench(tiny[0], puzzles, engine=Reversed())
    corrected = [SamplerSpec.parse("topk:k=5+corrector")]
    with pytest.raises(UnmaskError, match="topk k=5 \\+corrector: no corrector to decode"):
        bench_sudoku(tiny[0], puzzles, corrected, engine=Reversed(),
                     recipe=ModelRecipe(str(tiny[1])))  # a recipe without a corrector


def test_paths_for_workers_are_absolute_and_labels_unchanged(tiny, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "est").mkdir()
    (tmp_path / "model").mkdir()
    entry = SamplerSpec.parse("mi-guided:gamma=0.3,estimator=est")
    x = torch.full((1, 81), 10, dtype=torch.long)
    (shard,) = shards_of([Run(entry, x)], 4)
    assert shard.entry.params["estimator"] == str(tmp_path / "est")
    assert shard.entry.label == entry.label == "mi-guided gamma=0.3 estimator=est"
    assert ModelRecipe("model").name_or_path == str(tmp_path / "model")
    assert ModelRecipe("sudoku").name_or_path == "sudoku"  # a shipped name stays a name


# --- Ray ----------------------------------------------------------------------------------------

def _cli_rows(argv: list[str], out: Path) -> list[dict]:
    assert main([*argv, "--quiet", "--threads", "1", "--json", str(out)]) == 0
    return json.loads(out.read_text())


@pytest.mark.slow
def test_cli_benches_on_ray_write_the_local_rows(tiny, digits, tmp_path, capsys):
    """`--engine ray --workers 2` against the local engine, one thread per worker: the JSON
    files are equal but for wall-clock fields. Before the module's Ray instance is up: each
    command starts a local one and shuts it down."""
    sudoku = ["sudoku", "bench", "--model", str(tiny[1]), "--set", "medium", "--limit", "5",
              "--batch-size", "2", "--seed", "4", "--samplers", *SPECS]
    arith = ["arithmetic", "bench", "--limit", "4", "--tasks", "generate,factors",
             "--samplers", "confidence", "topk:k=2"]
    image = ["image", "bench", "--model", str(digits / "mdm"), "--classifier",
             str(digits / "clf"), "--limit", "4", "--rounds", "3", "--samplers", "confidence",
             "topk:k=16"]
    benches = [sudoku, arith, image]
    if importlib.util.find_spec("anarci") is not None:
        benches.append(["antibody", "bench", "--model", "protein", "--limit", "3",
                        "--batch-size", "2", "--settings", "random", "--samplers", "topk:k=4",
                        "eb", "--no-perplexity"])
    if importlib.util.find_spec("reasoning_gym") is not None:
        benches.append(["reasoning", "bench", "--model", str(_text_folder(tmp_path)),
                        "--tasks", "chain_sum", "--limit", "3", "--samplers", "confidence",
                        "topk:k=4"])
    for k, argv in enumerate(benches):
        local = _cli_rows(argv, tmp_path / f"local{k}.json")
        ray = _cli_rows([*argv, "--engine", "ray", "--workers", "2"], tmp_path / f"ray{k}.json")
        assert ({**ray, "rows": _file_rows(ray["rows"])}
                == {**local, "rows": _file_rows(local["rows"])})
    capsys.readouterr()


@pytest.mark.slow
def test_ray_workers_give_the_local_rows(tiny, puzzles, ray_session):
    local = _bench(tiny[0], puzzles)
    engine = RayEngine(2)
    rows = _bench(tiny[0], puzzles, engine=engine, recipe=ModelRecipe(str(tiny[1]),
                                                                      task="sudoku"))
    assert len(set(engine.pids)) == 2 and os.getpid() not in engine.pids
    assert _rows(rows) == _rows(local)


# --- the CLI --------------------------------------------------------------------------------------

BENCHES = [["sudoku", "bench", "--limit", "1"], ["protein", "bench", "--limit", "1"],
           ["arithmetic", "bench", "--limit", "1"], ["image", "bench", "--limit", "2"],
           ["reasoning", "bench", "--limit", "1"]]


@pytest.mark.parametrize("bench", BENCHES, ids=lambda b: b[0])
@pytest.mark.parametrize("args, line", [
    (["--workers", "0"], "argument --workers: must be >= 1, got 0"),
    (["--workers", "2"], "--workers: the local engine runs 1 worker, got 2; add --engine ray"),
    (["--engine", "dask"], "argument --engine: invalid choice: 'dask'"),
])
def test_bad_engine_flags_are_one_line(bench, args, line, capsys):
    assert main([*bench, "--quiet", *args]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and line in err


@pytest.mark.parametrize("bench", BENCHES, ids=lambda b: b[0])
def test_ray_not_installed_is_one_line(bench, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError
    assert main([*bench, "--quiet", "--engine", "ray", "--workers", "2"]) == 2
    assert capsys.readouterr().err.strip() == ("error: engine: ray is not installed "
                                               "(pip install 'unmask[ray]')")


def test_a_ray_device_with_an_index_is_refused(capsys):
    pytest.importorskip("ray")
    assert main(["sudoku", "bench", "--limit", "1", "--engine", "ray", "--device",
                 "cuda:1"]) == 2
    assert "--device: with --engine ray give cpu or cuda" in capsys.readouterr().err


def test_unreachable_ray_address_fails_in_one_line_and_writes_nothing(tiny, tmp_path):
    pytest.importorskip("ray")
    env = {**os.environ, "PYTHONPATH": SRC, "RAY_ADDRESS": "127.0.0.1:1"}
    t0 = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "unmask", "sudoku", "bench", "--model",
                           str(tiny[1]), "--limit", "1", "--samplers", "confidence", "--quiet",
                           "--json", str(tmp_path / "b.json"), "--engine", "ray"],
                          env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("error: RAY_ADDRESS: cannot reach 127.0.0.1:1")
    assert done.stderr.count("\n") == 1 and time.monotonic() - t0 < 60
    assert not (tmp_path / "b.json").exists()
