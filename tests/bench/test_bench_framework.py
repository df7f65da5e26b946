"""The bench contract (`unmask.bench.contract.BenchTask`, `BenchRow`) and the one builder of every
`unmask X bench` command (`unmask.commands.flags.bench`): same flags, same meanings, one file per
task."""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import pytest
import torch

from unmask.bench.contract import BenchContext, BenchOptions, BenchResult, BenchRow, BenchTask
from unmask.bench.recipe import ModelRecipe
from unmask.bench.report import load_bench, plot_bench, pool_bench
from unmask.bench.rows import add_rate_metrics
from unmask.bench.run import run_bench
from unmask.bench.sweep import Run, sweep
from unmask.cli import build_parser, main
from unmask.commands.flags.bench import BENCH_TASKS, add_bench_args, bench_task, run_bench_command
from unmask.decode import DecodeConfig, decode

#: the flags every bench has, with one meaning each
SHARED = {"--model", "--limit", "--samplers", "--preset", "--temperatures", "--seed",
          "--threads", "--device", "--dtype", "--engine", "--workers", "--cache", "--json",
          "--plot", "--quiet"}


def flags_of(noun: str) -> dict[str, argparse.Action]:
    parser = build_parser([(noun, "bench")])
    sub = parser._subparsers._group_actions[0].choices[noun]
    bench = sub._subparsers._group_actions[0].choices["bench"]
    return {s: a for a in bench._actions for s in a.option_strings}


def test_every_task_is_benched_through_the_builder():
    assert set(BENCH_TASKS) == {"sudoku", "protein", "arithmetic", "image", "reasoning",
                                "antibody"}
    for noun in BENCH_TASKS:
        task = bench_task(noun)
        assert isinstance(task, BenchTask) and task.name == noun


@pytest.mark.parametrize("noun", ["sudoku", "protein", "arithmetic", "image", "reasoning",
                                  "antibody"])
def test_every_bench_has_the_shared_flags_with_one_meaning(noun):
    flags = flags_of(noun)
    assert SHARED <= set(flags)
    assert flags["--dtype"].choices == ["float32", "bfloat16"]
    # counts are checked by argparse: a bad --limit never reaches the model
    with pytest.raises(argparse.ArgumentTypeError, match=">= 1|>= 2"):
        flags["--limit"].type("0")
    with pytest.raises(argparse.ArgumentTypeError):
        flags["--temperatures"].type("1,inf")
    assert flags["--temperatures"].type("0,0.5") == (0.0, 0.5)


@pytest.mark.parametrize("argv, message", [
    (["protein", "bench", "--limit", "0"], "argument --limit: must be >= 1, got 0"),
    (["image", "bench", "--limit", "1"], "argument --limit: must be >= 2, got 1"),
    (["reasoning", "bench", "--limit", "-3"], "argument --limit: must be >= 1, got -3"),
    (["arithmetic", "bench", "--temperatures", "nan"], "argument --temperatures"),
    (["sudoku", "bench", "--dtype", "float16"], "argument --dtype: invalid choice"),
])
def test_bad_shared_flags_are_one_line_before_any_work(argv, message, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err and "Traceback" not in err


@pytest.mark.parametrize("noun, argv, dest, value", [
    ("protein", ["--n", "7"], "limit", 7),
    ("image", ["--n", "9"], "limit", 9),
    ("arithmetic", ["--prompts", "5"], "limit", 5),
    ("protein", ["--temperature", "0.5"], "temperatures", (0.5,)),
    ("arithmetic", ["--temperature", "0"], "temperatures", (0.0,)),
    ("protein", ["--bf16"], "dtype", "bfloat16"),
])
def test_old_spellings_read_as_the_new_flags(noun, argv, dest, value):
    parser = build_parser([(noun, "bench")])
    args = parser.parse_args([noun, "bench", *argv])
    assert getattr(args, dest) == value
    assert args.deprecated_flags == [(argv[0], "--" + dest)]
    # hidden from --help: one spelling per meaning
    assert argv[0] not in parser._subparsers._group_actions[0].choices[noun].format_help()


def test_old_spellings_keep_their_checks(capsys):
    assert main(["image", "bench", "--n", "1"]) == 2
    assert "argument --n: must be >= 2" in capsys.readouterr().err


def test_bench_row_has_one_accuracy_and_the_shared_fields_first():
    row = BenchRow("topk k=2", "topk", 0.5, nfe=4.0, tokens_per_pass=3.0, n_items=2,
                   columns={"solved": 0.5, "solved_each": "01", "tokens_per_forward": 3.0})
    d = row.to_dict()
    assert list(d) == ["label", "name", "accuracy", "nfe", "sequences", "tokens_per_pass",
                       "sequences_per_token", "wall_s", "wall_per_solved", "n_items",
                       "solved", "solved_each", "tokens_per_forward"]
    assert (d["accuracy"], d["nfe"], d["tokens_per_pass"], d["n_items"]) == (0.5, 4.0, 3.0, 2)
    assert d["sequences"] is None and d["solved_each"] == "01"
    assert BenchRow.from_dict(d) == row  # a file's row reads back as the row
    old = BenchRow.from_dict({"label": "confidence", "name": "confidence", "solved": 0.5})
    assert old.accuracy is None and old.columns == {"solved": 0.5}


@dataclass(frozen=True, kw_only=True)
class FirstToken(BenchOptions):
    """The options of :class:`FirstTokenBench`: the shared ones, 3 items by default."""

    task: ClassVar[str] = "first-token"
    limit: int | None = 3


class FirstTokenBench(BenchTask):
    """A task in one class: all-masked rows, scored by whether token 0 comes first."""

    name = "first-token"
    options = FirstToken
    default_specs = ["confidence", "topk:k=4"]
    columns = [("sampler", "label", ""), ("acc", "accuracy", ".2f"), ("NFE", "nfe", ".1f")]

    def __init__(self, model):
        self.model = model

    def load_model(self, options, device):
        return self.model

    def recipe(self, options, model, device):
        return ModelRecipe("first-token")

    def run(self, ctx: BenchContext) -> BenchResult:
        x = torch.full((ctx.limit, 12), ctx.model.mask_id)
        config = DecodeConfig(temperature=ctx.temperatures[0])
        results = sweep([Run(e, x, config, ctx.seed) for e in ctx.entries], ctx.model,
                        **ctx.sweep)
        rows = []
        for entry, (res, wall) in zip(ctx.entries, results, strict=True):
            first_zero = float((res.tokens[:, 0] == 0).double().mean())
            rows.append(BenchRow(entry.label, entry.name, first_zero,
                                 nfe=float(res.nfe.double().mean()),
                                 sequences=float(res.sequences.double().mean()), wall_s=wall,
                                 n_items=ctx.limit,
                                 columns={"first_zero": first_zero, "revealed": 12.0}))
        add_rate_metrics(rows)
        return BenchResult(rows, {"length": 12})


def test_a_new_task_is_one_class_with_every_shared_flag(tiny_transformer, tmp_path, capsys):
    task = FirstTokenBench(tiny_transformer)
    parser = argparse.ArgumentParser()
    add_bench_args(parser, task)
    out = tmp_path / "b.json"
    args = parser.parse_args(["--limit", "4", "--temperatures", "0,1", "--seed", "3",
                              "--quiet", "--json", str(out)])
    assert run_bench_command(task, args) == 0
    data = json.loads(out.read_text())
    assert data["bench"] == "first-token" and data["temperatures"] == [0.0, 1.0]
    assert [r["label"] for r in data["rows"]] == ["confidence T=0", "topk k=4 T=0",
                                                   "confidence T=1", "topk k=4 T=1"]
    # each row is what decoding its entry gives, item r with seed --seed + r
    x = torch.full((4, 12), tiny_transformer.mask_id)
    for r, (spec, t) in zip(data["rows"], [("confidence", 0.0), ("topk", 0.0),
                                           ("confidence", 1.0), ("topk", 1.0)], strict=True):
        from unmask.samplers.spec import parse_spec
        entry = parse_spec("topk:k=4" if spec == "topk" else spec)
        nfe = torch.stack([decode(tiny_transformer, x[i:i + 1], entry.build(),
                                  DecodeConfig(temperature=t), seed=3 + i).nfe[0]
                           for i in range(4)]).double().mean()
        assert r["nfe"] == pytest.approx(float(nfe))
        assert r["accuracy"] == r["first_zero"] and r["n_items"] == 4
        assert r["tokens_per_pass"] == pytest.approx(12 / r["nfe"])
    assert "first-token bench" in capsys.readouterr().out
    assert data["options"] == {**FirstToken().to_json(), "limit": 4,
                               "temperatures": [0.0, 1.0], "seed": 3}
    # the same options from Python, no flags: the same rows
    ctx, result = run_bench(FirstToken(limit=4, temperatures=(0.0, 1.0), seed=3), task=task)
    assert ctx.options == FirstToken(limit=4, temperatures=(0.0, 1.0), seed=3)
    strip = [{k: v for k, v in r.items() if not k.startswith("wall")} for r in data["rows"]]
    assert [{k: v for k, v in r.items() if not k.startswith("wall")}
            for r in result.dicts()] == strip


def test_every_bench_s_options_are_its_flags_and_defaults():
    """``unmask NOUN bench`` with no flags builds the task's options at their defaults; each
    option is read from the flag of its name, and nothing but argparse-free code runs the
    bench."""
    from unmask.commands.flags.bench import options_from_args

    for noun in BENCH_TASKS:
        task = bench_task(noun)
        args = build_parser([(noun, "bench")]).parse_args([noun, "bench"])
        assert options_from_args(task, args) == task.options(), noun
        assert task.options.task == noun and isinstance(task.options(), BenchOptions)
    args = build_parser([("sudoku", "bench")]).parse_args(
        ["sudoku", "bench", "--set", "medium", "--limit", "7", "--samplers", "topk:k=3",
         "--no-self-condition", "--remask-threshold", "0.5", "--temperatures", "0,1"])
    from unmask.sudoku.bench_task import SudokuBench

    assert options_from_args(bench_task("sudoku"), args) == SudokuBench(
        set="medium", limit=7, samplers=("topk:k=3",), no_self_condition=True,
        remask_threshold=0.5, temperatures=(0.0, 1.0))


def test_the_corrector_options_default_to_the_corrector_hooks():
    import inspect

    from unmask.bench.contract import CorrectedBenchOptions
    from unmask.hooks import corrector_hooks

    params = inspect.signature(corrector_hooks).parameters
    d = CorrectedBenchOptions()
    assert (d.remask_threshold, d.max_remasks, d.ban_remasked) == (
        params["threshold"].default, params["max_remasks"].default,
        params["ban_remasked"].default)


@pytest.mark.parametrize("options, message", [
    ("ArithmeticBench(tasks='generate,cube')", "--tasks: unknown 'cube'"),
    ("ReasoningBench(tasks=('nope',))", "--tasks: unknown task 'nope'"),
    ("AntibodyBench(settings=('cdr', 'light'))", "--settings: unknown 'light'"),
    ("ProteinBench(min_length=90, max_length=60)", "lengths from 90 to 60 is an empty range"),
])
def test_a_bench_s_options_are_checked_in_one_line_before_the_model_loads(options, message):
    import importlib

    from unmask.errors import UnmaskError

    name = options.split("Bench(")[0].lower()
    module = importlib.import_module(f"unmask.{name}.bench_task")
    opts = eval(options, vars(module))  # noqa: S307 (the test's own literals)
    with pytest.raises(UnmaskError, match=message):
        bench_task(name).check(opts)


def test_checked_options_are_normalised():
    from unmask.antibody.bench_task import AntibodyBench
    from unmask.arithmetic.bench_task import ArithmeticBench

    assert ArithmeticBench(tasks="product, factors").tasks == ("product", "factors")
    assert bench_task("antibody").check(AntibodyBench(settings=("cdr", "cdr", "random"))
                                        ).settings == ("cdr", "random")


def test_results_read_every_tasks_files(tmp_path):
    """A protein-like file (reference rows without passes) and an arithmetic-like file (rows
    of several task parts) plot; files of two benches are refused together."""
    protein = {"bench": "protein", "n": 4, "seed": 0, "temperatures": [1.0], "rows": [
        {"label": "natural: held-out crops", "name": "natural", "accuracy": 0.9, "nfe": None,
         "sequences": None, "wall_s": None},
        {"label": "confidence", "name": "confidence", "accuracy": 0.7, "nfe": 60.0,
         "sequences": 60.0, "wall_s": 1.0},
        {"label": "topk k=12", "name": "topk", "accuracy": 0.8, "nfe": 6.0,
         "sequences": 6.0, "wall_s": 0.2}]}
    arith = {"bench": "arithmetic", "limit": 2, "seed": 0, "rows": [
        {"task": t, "label": s, "name": s.split()[0], "accuracy": a, "nfe": n,
         "solved_each": e, "wall_s": 0.1}
        for t, s, a, n, e in [("generate", "confidence", 1.0, 8.0, "11"),
                              ("generate", "topk k=2", 0.5, 4.0, "10"),
                              ("product", "confidence", 1.0, 3.0, "11"),
                              ("product", "topk k=2", 0.5, 2.0, "01")]]}
    paths = {}
    for name, data in (("protein", protein), ("arith", arith)):
        paths[name] = tmp_path / f"{name}.json"
        paths[name].write_text(json.dumps(data))
    assert plot_bench([str(paths["protein"])], tmp_path / "p.png") == 2  # natural left out
    assert [r["label"] for r in load_bench(paths["arith"])["rows"]] == [
        "generate confidence", "generate topk k=2", "product confidence", "product topk k=2"]
    assert plot_bench([str(paths["arith"])], tmp_path / "a.png", x="wall") == 4
    from unmask.errors import UnmaskError
    with pytest.raises(UnmaskError, match="different benches"):
        plot_bench([str(paths["protein"]), str(paths["arith"])], tmp_path / "x.png")
    with pytest.raises(UnmaskError, match="has no published points"):
        plot_bench([str(paths["protein"])], tmp_path / "x.png", references=True)


def test_pool_reads_files_of_another_task(tmp_path):
    def reasoning(seed, each):
        return {"bench": "reasoning", "tasks": ["chain_sum"], "limit": len(each["confidence"]),
                "seed": seed, "temperatures": [0.0], "rows": [
                    {"task": "chain_sum", "label": s, "name": s.split()[0],
                     "accuracy": e.count("1") / len(e), "nfe": n, "solved_each": e,
                     "wall_s": 1.0, "temperature": 0.0}
                    for (s, e), n in zip(each.items(), (8.0, 4.0), strict=True)]}

    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps(reasoning(0, {"confidence": "110", "topk k=2": "100"})))
    b.write_text(json.dumps(reasoning(3, {"confidence": "1", "topk k=2": "1"})))
    pooled = pool_bench([str(a), str(b)], tmp_path / "p.json", quiet=True)
    rows = {r["label"]: r for r in pooled["rows"]}
    assert pooled["bench"] == "reasoning" and pooled["puzzles"] == 4
    assert rows["topk k=2"]["solved_each"] == "1001"
    assert rows["topk k=2"]["accuracy"] == 0.5 and rows["topk k=2"]["vs_seq"] == "+0/-1"


def test_antibody_bench_rows_are_the_infill_metrics(tmp_path):
    """`unmask antibody bench` on the framework: a row's recovery is that of the same
    templates filled by `unmask.infill` with the same seed, and its accuracy is the
    recovery."""
    pytest.importorskip("anarci")
    from unmask import infill
    from unmask.antibody import cdr_infilling, load_heavy_chains, residue_recovery
    from unmask.models.auto import load_model

    out = tmp_path / "ab.json"
    assert main(["antibody", "bench", "--model", "protein", "--limit", "2", "--settings",
                 "cdr", "--samplers", "topk:k=4", "--no-perplexity", "--seed", "5",
                 "--quiet", "--threads", "1", "--json", str(out)]) == 0
    [row] = json.loads(out.read_text())["rows"]
    cases = cdr_infilling(load_heavy_chains("held_out")[:2])
    gens = infill(load_model("protein"), [c.template for c in cases], sampler="topk:k=4",
                  seed=5)
    n = [c.masked.sum() for c in cases]
    expect = (residue_recovery([g.text for g in gens], cases) * n).sum() / sum(n)
    assert row["task"] == "cdr" and row["accuracy"] == row["recovery"]
    assert row["recovery"] == pytest.approx(expect)
    assert row["nfe"] == pytest.approx(sum(g.nfe for g in gens) / 2)
    assert row["masked_each"] == [int(k) for k in n]
    assert row["nfe_each"] == [g.nfe for g in gens]
    assert sum(row["recovered_each"]) / sum(n) == pytest.approx(row["recovery"])


def test_antibody_paired_recovery_is_by_chain():
    """The difference of two rows' pooled recovery, with the standard error of its chain-level
    paired differences (chains, not residues, are the independent units)."""
    from unmask.antibody.bench import paired_recovery, vs_sequential

    def row(label, recovered, masked=(10, 10, 10)):
        return BenchRow(label, label.split()[0], None,
                        columns={"recovered_each": recovered, "masked_each": list(masked)})

    seq, eb = row("confidence", [8, 5, 9]), row("eb gamma=1", [7, 5, 6])
    diff, se = paired_recovery(eb, seq)
    d = np.array([-1.0, 0.0, -3.0])  # per-chain differences
    assert diff == pytest.approx(100 * d.sum() / 30)
    assert se == pytest.approx(100 * np.sqrt(3) * d.std(ddof=1) / 30)
    assert paired_recovery(eb, row("confidence", [8, 5, 9], (10, 10, 9))) is None
    assert paired_recovery(row("eb gamma=1", None), seq) is None
    assert vs_sequential([eb, seq]) == [f"{diff:+.1f} ± {se:.1f}", None]
    assert vs_sequential([eb]) == [None]  # no sequential row to pair against
    # a row over the first chains only (an oracle's) is compared on those
    first = row("mi-oracle", [7, 5], (10, 10))
    assert paired_recovery(first, seq)[0] == pytest.approx(100 * -1.0 / 20)


def test_antibody_oracle_decodes_the_first_chains_only(tmp_path):
    """mi-oracle rows decode the first --oracle-limit cases, exactly as unmask.infill decodes
    those templates; the other rows decode all of them."""
    pytest.importorskip("anarci")
    from unmask import infill
    from unmask.antibody import cdr_infilling, load_heavy_chains
    from unmask.models.auto import load_model

    out = tmp_path / "ab.json"
    oracle = "mi-oracle:gamma=1.0,free_max=true,stop_at_first_miss=true"
    assert main(["antibody", "bench", "--model", "protein", "--limit", "3", "--oracle-limit",
                 "1", "--settings", "cdr", "--samplers", "confidence", oracle,
                 "--no-perplexity", "--quiet", "--threads", "1", "--json", str(out)]) == 0
    seq, orc = json.loads(out.read_text())["rows"]
    assert (seq["n_items"], orc["n_items"]) == (3, 1)
    [case] = cdr_infilling(load_heavy_chains("held_out")[:1])
    [g] = infill(load_model("protein"), [case.template], sampler=oracle)
    assert orc["nfe_each"] == [g.nfe] and orc["sequences"] == g.sequences
