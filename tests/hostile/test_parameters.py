"""Hostile parameters on every command: numbers out of range, NaN and infinities, text
where a number goes, sampler specs. A refusal is one line naming the flag; nothing is
written. Commands that would run long get an --out/--json under a regular file, so an
accepted value still ends in a refusal (of the path) before any work."""

import os
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from .conftest import files_in

FAST = settings(max_examples=15, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture])

HOSTILE_TEXT = ["", " ", "nan", "NaN", "inf", "-inf", "1e999", "-1e999", "0", "-0", "-1",
                "0x10", "1_000", "True", "None", "1.5", "9" * 30, "-" + "9" * 30, "\x00",
                "١", "1e-320"]
values = st.one_of(st.sampled_from(HOSTILE_TEXT),
                   st.integers(-(10**20), 10**20).map(str),
                   st.floats(allow_nan=True, allow_infinity=True).map(repr),
                   st.text(max_size=8))


@pytest.fixture
def blocked(tmp_path):
    """A path whose 'folder' is a regular file: every write under it is refused."""
    (tmp_path / "file").write_text("x")
    return tmp_path / "file" / "sub"


# command -> (the flags to probe, the rest of a cheap or refused invocation)
def commands(tiny, puzzle, blocked):
    return {
        ("sudoku", "solve"): (["--threads", "--temperature", "--batch-size", "--seed",
                               "--remask-threshold"],
                              [puzzle, "--model", tiny, "--json"]),
        ("sudoku", "train"): (["--steps", "--batch-size", "--lr", "--warmup", "--eval-every",
                               "--max-time", "--threads", "--seed", "--pool",
                               "--puzzle-fraction", "--eval-puzzles", "--deepen"],
                              ["--out", blocked]),
        ("sudoku", "bench"): (["--limit", "--batch-size", "--seed", "--threads",
                               "--remask-threshold", "--max-remasks"],
                              ["--model", tiny, "--json", f"{blocked}.json"]),
        ("mi", "label"): (["--contexts", "--shard-size", "--seed", "--eps", "--batch-size",
                           "--threads", "--mask-ratio"],
                          ["--contexts", "1", "--out", blocked]),
        ("mi", "train"): (["--epochs", "--batch-size", "--lr", "--patience", "--eval-every",
                           "--held-out", "--split-seed", "--seed", "--layer", "--d",
                           "--augment", "--rank-weight", "--max-time", "--threads"],
                          ["--labels", blocked, "--out", blocked]),
        ("mi", "eval"): (["--cost-batch", "--threads"], ["--labels", blocked]),
        ("mi", "map"): (["--eps", "--threads", "--cell"],
                        [puzzle, "--out", f"{blocked}.png"]),
        ("corrector", "train"): (["--puzzles", "--pool-seed", "--epochs", "--patience",
                                  "--batch-size", "--lr", "--d", "--layers", "--held-out",
                                  "--seed", "--max-time", "--threads"],
                                 ["--model", tiny, "--out", blocked]),
        ("protein", "train"): (["--steps", "--lr", "--heldout-fraction", "--split-seed",
                                "--eval-size", "--threads", "--seed"], ["--out", blocked]),
        ("protein", "bench"): (["--limit", "--temperatures", "--min-length", "--max-length",
                                "--batch-size", "--seed", "--threads", "--dtype", "--device",
                                "--n", "--temperature"],
                               ["--json", f"{blocked}.json"]),
        ("arithmetic", "train"): (["--a-digits", "--b-digits", "--eval-prompts", "--steps",
                                   "--threads"], ["--out", blocked]),
        ("arithmetic", "bench"): (["--limit", "--temperatures", "--seed", "--threads",
                                   "--tasks", "--prompts", "--temperature"],
                                  ["--json", f"{blocked}.json"]),
    }


@FAST
@given(data=st.data())
def test_hostile_values_on_every_flag(run, tiny_model, nearly_solved, blocked, data):
    table = commands(tiny_model, nearly_solved[0], blocked)
    path = data.draw(st.sampled_from(sorted(table)))
    flags, rest = table[path]
    flag = data.draw(st.sampled_from(flags))
    value = data.draw(values)
    before = files_in(blocked.parent.parent)
    r = run(*path, *rest, f"{flag}={value}")
    r.ok_or_refused()
    assert files_in(blocked.parent.parent) == before
    if r.code == 0:  # only `sudoku solve` can run to the end here
        assert path == ("sudoku", "solve")


@pytest.mark.parametrize("argv, needle", [
    (["sudoku", "solve", "x", "--threads", "0"], "--threads: must be >= 1"),
    (["sudoku", "solve", "x", "--threads", "-1"], "--threads: must be >= 1"),
    (["sudoku", "solve", "x", "--threads", "100000"], "--threads: must be <="),
    (["sudoku", "solve", "x", "--temperature", "inf"], "--temperature: must be a finite"),
    (["sudoku", "solve", "x", "--temperature", "nan"], "--temperature: must be a finite"),
    (["sudoku", "solve", "x", "--temperature", "-1"], "--temperature: must be >= 0"),
    (["sudoku", "solve", "x", "--seed", str(2**64)], "--seed: must be < 2**63"),
    (["sudoku", "solve", "x", "--seed", "-3"], "--seed: must be >= 0"),
    (["sudoku", "solve", "x", "--batch-size", "0"], "--batch-size: must be >= 1"),
    (["sudoku", "bench", "--threads", "-1"], "--threads"),
    (["sudoku", "train", "--lr", "nan"], "--lr"),
    (["sudoku", "train", "--steps", "0"], "--steps"),
    (["mi", "train", "--labels", "x", "--out", "y", "--held-out", "1.5"], "--held-out"),
    (["arithmetic", "bench", "--tasks", ""], "--tasks: no task given"),
    (["arithmetic", "bench", "--tasks", ",,"], "--tasks: no task given"),
    (["arithmetic", "bench", "--tasks", "divide"], "--tasks: unknown 'divide'"),
    (["protein", "bench", "--min-length", "90", "--max-length", "50"], "--min-length"),
    (["demo", "--puzzles", "0"], "--puzzles"),
    (["demo", "--threads", "0"], "--threads"),
    (["sudoku", "solve", "x", "--nonsense"], "unrecognized arguments"),
    (["sudoku"], "the following arguments are required"),
    (["train", "sudoku"], "invalid choice: 'train'"),                 # the old spelling
    (["bench", "sudoku"], "invalid choice: 'bench'"),
])
def test_bad_parameters_are_one_line(run, argv, needle):
    run(*argv).refused(needle)


@pytest.mark.parametrize("config", ["[1]", "{", "\"x\"", "{\"d_model\": \"128\"}",
                                    "{\"no_such_field\": 1}", "{\"n_layers\": -1}"])
def test_hostile_model_config_on_training(run, tmp_path, config):
    out = tmp_path / "run"
    r = run("sudoku", "train", "--out", out, "--steps", "1", "--eval-every", "1", "--warmup",
            "0", "--pool", "20", "--eval-puzzles", "1", "--model-config", config)
    r.ok_or_refused()
    if r.code == 2:  # the flag, or the field the config refused
        assert "--model-config" in r.err or "n_layers" in r.err


# ------------------------------------------------------------------------ sampler specs

spec_chars = st.text(alphabet="ebtopkconfidec:=,+.0123-verifyrcx ", max_size=30)
names = st.sampled_from(["confidence", "topk", "eb", "threshold", "uniform", "info-gain"])
spec_parts = st.builds(lambda n, p, s: n + p + s, names,
                       st.sampled_from(["", ":k=3", ":k=0", ":gamma=x", ":gamma=0.1",
                                        ":tau=2", ":k", ":=", ":k=3,k=4", ":order=sideways"]),
                       st.sampled_from(["", "+verify", "+verify=0", "+verify=2", "+corrector",
                                        "+verify+corrector", "+bogus", "+", "+verify=x"]))


@FAST
@given(spec=st.one_of(spec_chars, spec_parts))
def test_hostile_sampler_specs_on_solve(run, tiny_model, nearly_solved, spec):
    r = run("sudoku", "solve", nearly_solved[0], "--model", tiny_model, "--json",
            f"--sampler={spec}")
    r.ok_or_refused()
    if r.code == 2 and "--sampler" not in r.err:
        # a spec that parsed may still be refused later (e.g. the corrector's model check)
        assert "corrector" in r.err


@FAST
@given(spec=st.one_of(spec_chars, spec_parts))
def test_hostile_sampler_specs_on_bench(run, tiny_model, tmp_path_factory, spec):
    out = tmp_path_factory.mktemp("specs") / "b.json"
    r = run("sudoku", "bench", "--model", tiny_model, "--limit", "1", "--quiet", "--samplers",
            f"{spec}", "--json", out, "--remask-threshold", "0.3")
    if r.ok_or_refused():
        assert out.is_file()
    else:
        assert not out.exists()


@pytest.mark.parametrize("spec, needle", [
    ("eb+foo", "--samplers"),
    ("eb:gamma=x", "--samplers"),
    ("", "--samplers"),
])
def test_bad_bench_specs_are_one_line(run, tiny_model, spec, needle):
    run("sudoku", "bench", "--model", tiny_model, "--limit", "1", "--samplers",
        spec).refused(needle)


# ------------------------------------------------------------------------------ threads


def test_threads_reach_torch_and_numba_and_numba_leaves_torch_alone(tmp_path):
    """numba's OpenMP pool sets the process's OpenMP thread count when it starts; torch
    shares it. After apply_threads the solvability check (numba) leaves torch's count as
    it was, with and without --threads."""
    script = (
        "import torch, numba\n"
        "from unmask.commands.flags.threads import apply_threads\n"
        "from unmask.sudoku.parse import parse_puzzle\n"
        "n = int(sys.argv[1]) if len(sys.argv) > 1 else None\n"
        "apply_threads(n)\n"
        "parse_puzzle('.' * 81)\n"
        "print(torch.get_num_threads(), numba.get_num_threads())\n"
    )
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    for extra, expected in (([], "1 1"), (["1"], "1 1")):
        out = subprocess.run([sys.executable, "-c", "import sys\n" + script, *extra],
                             env=env, capture_output=True, text=True, timeout=300, check=True)
        assert out.stdout.split() == expected.split(), out.stderr


def test_main_keeps_the_callers_thread_counts(run, nearly_solved, tiny_model):
    import torch

    before = torch.get_num_threads()
    assert run("sudoku", "solve", nearly_solved[0], "--model", tiny_model, "--threads", "1",
               "--json").code == 0
    assert torch.get_num_threads() == before
