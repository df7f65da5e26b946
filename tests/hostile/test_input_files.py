"""Hostile input files and folders besides puzzles and models: decoder states, FASTA,
label folders, estimator and corrector folders. Each is refused in one line; nothing is
unpickled beyond tensors (``weights_only``)."""

import pickle

import pytest

from .conftest import files_in


class Boom:
    """Unpickling this runs code: a crafted file must never get that far."""

    def __reduce__(self):
        return (exec, ("raise SystemExit('pickled code ran')",))


@pytest.fixture
def garbage(tmp_path):
    (tmp_path / "bin.dat").write_bytes(bytes(range(256)) * 4)
    (tmp_path / "empty.dat").write_bytes(b"")
    (tmp_path / "edir").mkdir()
    (tmp_path / "evil.pt").write_bytes(pickle.dumps(Boom(), protocol=2))
    return tmp_path


@pytest.mark.parametrize("argv, needle", [
    (["sudoku", "train", "--decoder-states", "{g}/bin.dat"], "--decoder-states"),
    (["sudoku", "train", "--decoder-states", "{g}/empty.dat"], "--decoder-states"),
    (["sudoku", "train", "--decoder-states", "{g}/evil.pt"], "--decoder-states"),
    (["sudoku", "train", "--decoder-states", "{g}/edir"], "--decoder-states"),
    (["sudoku", "train", "--init-from", "{g}/edir"], "config.json"),
    (["protein", "bench", "--fasta", "{g}/bin.dat", "--limit", "1"], "fasta"),
    (["protein", "train", "--fasta", "{g}/empty.dat", "--steps", "1"], "fasta"),
    (["mi", "eval", "--labels", "{g}/edir"], "manifest.json"),
    (["mi", "eval", "--labels", "{g}/missing"], "--labels"),
    (["mi", "train", "--labels", "{g}/bin.dat"], "--labels"),
    (["sudoku", "bench", "--set", "{g}/bin.dat"], "binary file"),
    (["sudoku", "bench", "--set", "{g}/empty.dat"], "no puzzle in file"),
    (["sudoku", "bench", "--set", "{g}/missing.txt"], "cannot read"),
    (["sudoku", "bench", "--limit", "1", "--samplers", "mi-guided", "--estimator", "{g}/edir"],
     "edir"),
    (["sudoku", "solve", "." * 81, "--sampler", "confidence+corrector", "--corrector",
      "{g}/edir"], "edir"),
], ids=lambda a: " ".join(a[:3]) if isinstance(a, list) else None)
def test_bad_input_files_are_one_line(run, garbage, argv, needle):
    argv = [a.format(g=garbage) for a in argv]
    if "--out" not in argv and argv[1] == "train":
        argv += ["--out", str(garbage / "run")]
    before = files_in(garbage)
    line = run(*argv).refused(needle)
    assert "pickled code ran" not in line
    assert files_in(garbage) - before <= {"run"}  # at most the (empty) run folder
