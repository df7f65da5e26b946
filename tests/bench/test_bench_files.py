"""Every task's bench file, row by row: the keys in their order and every value, against the
files the benches wrote before their rows were typed (``tests/data/bench_files.json``, wall
clock left out). Floats to 1e-4 relative (kernels differ between CPU capabilities).

Record anew (only when a bench's file is meant to change):
``PYTHONPATH=src python tests/test_bench_files.py``.
"""

import importlib.util
import itertools
import json
import sys
import sysconfig
from pathlib import Path

import pytest
import torch

from unmask.cli import main

EXPECTED = Path(__file__).parents[1] / "data" / "bench_files.json"
#: wall-clock fields: they differ run to run
WALL = {"wall_s", "puzzles_per_s", "wall_per_solved", "proteins_per_s", "ms_per_step"}
BENCHES = {
    "sudoku": ["sudoku", "bench", "--set", "medium", "--limit", "4", "--samplers", "confidence",
               "topk:k=5", "eb:gamma=1.0,order=confidence+verify=0.002"],
    "protein": ["protein", "bench", "--limit", "2", "--samplers", "confidence", "topk:k=12"],
    "arithmetic": ["arithmetic", "bench", "--limit", "3", "--tasks", "generate,factors",
                   "--samplers", "confidence", "topk:k=2"],
    "image": ["image", "bench", "--limit", "4", "--rounds", "3", "--samplers", "confidence",
              "topk:k=16"],
    "reasoning": ["reasoning", "bench", "--tasks", "chain_sum", "--limit", "2",
                  "--temperatures", "0,0.5", "--samplers", "confidence", "topk:k=8"],
    "antibody": ["antibody", "bench", "--model", "protein", "--limit", "2", "--settings",
                 "cdr", "unconditional", "--samplers", "confidence", "topk:k=4",
                 "--no-perplexity"],
}
NEEDS = {"reasoning": "reasoning_gym", "antibody": "anarci"}


def bench_file(name: str, tmp: Path) -> dict:
    """The bench's JSON file, its rows without wall-clock fields."""
    out = tmp / f"{name}.json"
    threads = torch.get_num_threads()
    try:
        code = main([*BENCHES[name], "--seed", "1", "--quiet", "--threads", "1",
                     "--json", str(out)])
    finally:
        torch.set_num_threads(threads)
    assert code == 0
    data = json.loads(portable(out.read_text()))
    # the options the run was asked for (recorded since): they read back as the flags' own
    from unmask.commands.flags.bench import bench_task

    options = bench_task(name).options.from_json(data.pop("options"))
    argv = BENCHES[name][BENCHES[name].index("--samplers") + 1:]
    specs = tuple(itertools.takewhile(lambda a: not a.startswith("--"), argv))
    assert (options.seed, options.samplers) == (1, specs)
    # and the decoding request of each entry and temperature
    from unmask.request import DecodeRequest

    requests = data.pop("requests")
    assert len(requests) == len(specs) * len(options.temperatures)
    first = DecodeRequest.from_json(requests[0]["request"])
    assert first == DecodeRequest(sampler=specs[0], temperature=options.temperatures[0],
                                  seed=1, confidence=getattr(options, "confidence", "draw"))
    data["rows"] = [{k: v for k, v in r.items() if k not in WALL} for r in data["rows"]]
    return data


def portable(text: str) -> str:
    """``text`` with this install's paths (packages' data files a bench reads, e.g. the
    protein bench's default FASTA) written as ``<site-packages>``: the files do not depend on
    where the environment lives."""
    site = sysconfig.get_paths()["purelib"]
    return text.replace(json.dumps(site)[1:-1], "<site-packages>")


def same(got, want, where: str = "") -> None:
    """``got`` equals ``want``: dict keys in the same order, floats to 1e-4."""
    if isinstance(want, dict):
        assert isinstance(got, dict) and list(got) == list(want), where
        for k in want:
            same(got[k], want[k], f"{where}.{k}")
    elif isinstance(want, list):
        assert isinstance(got, list) and len(got) == len(want), where
        for i, (g, w) in enumerate(zip(got, want, strict=True)):
            same(g, w, f"{where}[{i}]")
    elif isinstance(want, float):
        assert got == pytest.approx(want, rel=1e-4, abs=1e-9), where
    else:
        assert type(got) is type(want) and got == want, where


@pytest.mark.parametrize("name", list(BENCHES))
def test_bench_file_is_the_one_written_before(name, tmp_path):
    if name in NEEDS:
        pytest.importorskip(NEEDS[name])
    want = json.loads(EXPECTED.read_text())[name]
    got = bench_file(name, tmp_path)
    same(got, want, name)


if __name__ == "__main__":
    import tempfile

    files = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in BENCHES:
            if name in NEEDS and importlib.util.find_spec(NEEDS[name]) is None:
                sys.exit(f"{NEEDS[name]} is needed to record the {name} bench")
            files[name] = bench_file(name, Path(tmp))
    EXPECTED.parent.mkdir(exist_ok=True)
    EXPECTED.write_text(json.dumps(files, indent=1) + "\n")
