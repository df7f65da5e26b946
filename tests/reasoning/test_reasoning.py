import json

import pytest
import torch

from unmask.cli import main
from unmask.errors import UnmaskError
from unmask.models.auto import load_model
from unmask.reasoning.bench import (
    POOLED,
    SELECT_SEED,
    aup_by_temperature,
    pool_rows,
    solve,
)
from unmask.reasoning.bench import (
    run_bench as run_reasoning_bench,
)
from unmask.reasoning.tasks import TASKS, get_tasks
from unmask.reasoning.tokenizer import char_tokenizer
from unmask.reasoning.train import (
    TRAIN_SEED,
    ReasoningData,
    TextModelConfig,
    encode_pool,
    text_mdm,
    train_text_mdm,
    training_batch,
)
from unmask.samplers.spec import parse_spec
from unmask.training.loop import LoopConfig, TrainConfig

pytest.importorskip("reasoning_gym")

TINY = TextModelConfig(hidden_size=16, layers=1, heads=2, ff_size=32, max_length=640)


@pytest.fixture(scope="module")
def tiny_folder(tmp_path_factory):
    """A random text MDM saved as a transformers folder with its tokenizer."""
    path = tmp_path_factory.mktemp("text") / "model"
    tok = char_tokenizer(TINY.max_length)
    torch.manual_seed(0)
    text_mdm(tok, TINY).save_pretrained(path)
    tok.save_pretrained(path)
    return path


def test_tokenizer_is_one_id_per_character_and_round_trips():
    tok = char_tokenizer()
    text = "Solve:\n2 _ 3\nWhat is 12 + 30?"
    ids = tok(text)["input_ids"]
    assert ids[0] == tok.cls_token_id and ids[-1] == tok.sep_token_id
    assert len(ids) == len(text) + 2
    assert tok.decode(ids, skip_special_tokens=True) == text
    assert tok("é")["input_ids"][1] == tok.unk_token_id
    assert len({tok.pad_token_id, tok.mask_token_id, tok.eos_token_id, tok.cls_token_id,
                tok.sep_token_id, tok.unk_token_id}) == 6


def test_saved_folder_loads_as_a_text_model_with_characters_and_eos_as_real_tokens(
        tiny_folder):
    model = load_model(tiny_folder, task="text")
    tok = model.tokenizer
    assert model.mask_id == tok.mask_token_id and model.eos_ids == (tok.eos_token_id,)
    assert model.pad_id == tok.pad_token_id
    real = set(model.real_token_ids)
    assert tok.eos_token_id in real and tok.convert_tokens_to_ids("7") in real
    assert not real & {tok.pad_token_id, tok.mask_token_id, tok.cls_token_id, tok.sep_token_id}


@pytest.mark.parametrize("name", list(TASKS))
def test_tasks_are_deterministic_and_their_verifier_accepts_the_reference(name):
    task = TASKS[name]
    a, b = task.items(3, 7), task.items(3, 7)
    assert [i.prompt for i in a] == [i.prompt for i in b]
    assert [i.answer for i in a] != [i.answer for i in task.items(3, 8)] or name == "mini_sudoku"
    for item in a:
        assert "Final answer format" not in item.prompt and "Do not include" not in item.prompt
        assert task.correct(item.answer, item)
        assert not task.correct(item.answer + "1", item)
        assert len(item.answer) < task.gen_length


def test_countdown_verifier_accepts_any_valid_expression():
    task = TASKS["countdown"]
    items = [i for i in task.items(40, 11) if len(i.answer.split()) == 5
             and i.answer.split()[1] == "+"]
    assert items
    for item in items:
        a, _, b, op, c = item.answer.split()
        alt = f"{b} + {a} {op} {c}"  # the reference with its first sum swapped
        assert alt != item.answer and task.correct(alt, item)
        assert not task.correct(f"{b} + {a} {op} {int(c) + 1}", item)


def test_get_tasks_refuses_unknown_names():
    assert [t.name for t in get_tasks(["countdown", "countdown"])] == ["countdown"]
    with pytest.raises(UnmaskError, match="unknown task 'sudokuu'"):
        get_tasks(["sudokuu"])


def _pool():
    tok = char_tokenizer()
    data = ReasoningData(tasks=("chain_sum", "mini_sudoku"), weights=(1.0, 1.0), pool=20)
    return tok, data, encode_pool(tok, data, 640, log=lambda s: None)


def test_training_batches_mask_only_answers_and_are_a_function_of_seed_and_step():
    tok, data, pool = _pool()
    kw = dict(pad_id=tok.pad_token_id, mask_id=tok.mask_token_id, seed=3)
    a = training_batch(pool, data.weights, 5, 8, **kw)
    b = training_batch(pool, data.weights, 5, 8, **kw)
    assert torch.equal(a.input_ids, b.input_ids) and torch.equal(a.loss_mask, b.loss_mask)
    masked = a.input_ids == tok.mask_token_id
    assert torch.equal(masked, a.loss_mask)
    assert bool(a.loss_mask.any(1).all())
    gen = TASKS[a.task].gen_length
    # masked positions lie in the answer region: the last gen_length columns
    assert not a.loss_mask[:, :-gen].any()
    # left padding: out of attention, positions counted from the first real token
    pad = a.targets == tok.pad_token_id
    assert torch.equal(a.attention_mask == 0, pad)
    first = a.attention_mask.argmax(1)
    assert bool((a.position_ids[torch.arange(8), first] == 0).all())
    assert {training_batch(pool, data.weights, i, 2, **kw).task for i in range(20)} == {
        "chain_sum", "mini_sudoku"}
    # the answer region holds the answer, then EOS
    assert bool((a.targets[:, -1] == tok.eos_token_id).all())


def test_training_pool_seeds_lie_above_the_bench_and_selection_problems():
    assert SELECT_SEED + 10_000 <= TRAIN_SEED
    with pytest.raises(UnmaskError, match="seed"):
        run_reasoning_bench(None, get_tasks(["chain_sum"]), [parse_spec("confidence")],
                            limit=10, seed=SELECT_SEED - 5)


def test_a_short_training_run_writes_a_loadable_checkpoint_and_resumes(tmp_path):
    loop = LoopConfig(total_steps=4, lr=1e-3, min_lr=1e-4, warmup_steps=1, eval_every=2,
                      metric="accuracy", higher_is_better=True, stop_at_step=2, batch_size=4)
    data = ReasoningData(tasks=("chain_sum", "basic_arithmetic"), weights=(1.0, 1.0),
                         pool=16)
    kw = dict(model_config=TINY, data=data, eval_n=2, log=lambda s: None)
    first = train_text_mdm(tmp_path, TrainConfig(loop=loop), **kw)
    assert first[-1]["step"] == 2
    import dataclasses
    # as the code before TrainConfig wrote it: the step's settings under "training", the
    # loop unrecorded; such a run folder resumes, saying what it cannot check
    ckpt = tmp_path / "checkpoint.pt"
    state = torch.load(ckpt, weights_only=True)
    del state["train_config"]
    state["training"] = {"batch_size": 4, "seed": 0, "bf16": True, "weight_decay": 0.05}
    torch.save(state, ckpt)
    logs = []
    rest = train_text_mdm(tmp_path,
                          TrainConfig(loop=dataclasses.replace(loop, stop_at_step=None)),
                          resume=True, **{**kw, "log": logs.append})
    assert any("records no train_config (not checked)" in s for s in logs), logs
    assert "train_config" in torch.load(ckpt, weights_only=True)
    assert rest[-1]["step"] == 4 and 0.0 <= rest[-1]["accuracy"] <= 1.0
    model = load_model(tmp_path / "best", task="text")
    assert model.max_length == TINY.max_length


def test_solve_sequential_decoding_takes_gen_length_passes(tiny_folder):
    model = load_model(tiny_folder, task="text")
    task = TASKS["chain_sum"]
    items = task.items(3, 0)
    out = solve(model, task, items, "confidence")
    assert [s.nfe for s in out] == [task.gen_length] * 3
    assert all(s.correct == task.correct(s.answer, s.item) for s in out)
    assert all(s.cumulative_entropy > 0 for s in out)


def test_bench_rows_pool_and_pair_against_sequential(tiny_folder):
    model = load_model(tiny_folder, task="text")
    tasks = get_tasks(["chain_sum", "countdown"])
    entries = [parse_spec("confidence"), parse_spec("topk:k=4"), parse_spec("info-gain:k=4")]
    rows = run_reasoning_bench(model, tasks, entries, limit=3, temperatures=(0.0, 1.0))
    assert len(rows) == 2 * 3 * 3
    by = {(r.label, r.columns["task"], r.columns["temperature"]): r for r in rows}
    conf = by[("confidence", POOLED, 0.0)]
    assert conf.n_items == 6 and conf.columns["tokens_per_forward"] == pytest.approx(1.0)
    assert conf.columns["gained_vs_ref"] == 0 and conf.columns["lost_vs_ref"] == 0
    topk = by[("topk k=4", "countdown", 1.0)]
    assert topk.nfe == TASKS["countdown"].gen_length / 4
    assert topk.tokens_per_pass == topk.columns["tokens_per_forward"] == 4.0
    ig = by[("info-gain k=4", "chain_sum", 0.0)]
    assert ig.sequences > ig.nfe
    for r in rows:
        each = r.columns["solved_each"]
        assert r.accuracy == pytest.approx(each.count("1") / r.n_items)
    pooled = pool_rows([by[("topk k=4", t.name, 0.0)] for t in tasks])
    assert pooled.columns["tokens_per_forward"] == pytest.approx(
        (8 + 16) / (8 / 4 + 16 / 4))
    assert pooled.columns["solved_each"] == "".join(
        by[("topk k=4", t.name, 0.0)].columns["solved_each"] for t in tasks)
    assert set(aup_by_temperature(rows)) == {0.0, 1.0}


def test_bench_rows_with_confidence_max_say_so_and_pair_against_their_own_sequential(
        tiny_folder):
    model = load_model(tiny_folder, task="text")
    tasks = get_tasks(["chain_sum"])
    entries = [parse_spec("confidence"), parse_spec("topk:k=4")]
    drawn = run_reasoning_bench(model, tasks, entries, limit=3, temperatures=(1.0,))
    largest = run_reasoning_bench(model, tasks, entries, limit=3, temperatures=(1.0,),
                                  confidence="max")
    assert [r.label for r in largest] == ["confidence conf=max"] * 2 + ["topk k=4 conf=max"] * 2
    assert {r.columns["confidence"] for r in largest} == {"max"}
    assert {r.columns["confidence"] for r in drawn} == {"draw"}
    assert all(r.columns["gained_vs_ref"] == r.columns["lost_vs_ref"] == 0
               for r in largest[:2])
    assert all(r.columns["gained_vs_ref"] is not None for r in largest)


def test_bench_cli_writes_json_and_plot(tiny_folder, tmp_path, capsys):
    out, plot = tmp_path / "r.json", tmp_path / "r.png"
    rc = main(["reasoning", "bench", "--model", str(tiny_folder), "--tasks", "chain_sum",
               "--limit", "2", "--samplers", "confidence", "eb:gamma=1.0", "--quiet",
               "--temperatures", "0,1.5", "--json", str(out), "--plot", str(plot)])
    assert rc == 0
    assert "AUP" in capsys.readouterr().out
    data = json.loads(out.read_text())
    assert len(data["rows"]) == 2 * 2 * 2
    for r in data["rows"]:
        for key in ("label", "task", "accuracy", "nfe", "sequences", "cumulative_entropy",
                    "wall_s", "temperature", "tokens_per_forward"):
            assert key in r
    assert set(data["aup"]) == {"0.0", "1.5"}
    assert plot.read_bytes()[:4] == b"\x89PNG"


@pytest.mark.parametrize("args, message", [
    (["--tasks", "nope"], "--tasks: unknown task 'nope'"),
    (["--limit", "0"], "--limit: must be >= 1"),
    (["--temperatures", "0,-1"], "--temperatures: expected finite numbers >= 0"),
])
def test_bench_cli_bad_input_is_one_line_exit_2(tiny_folder, tmp_path, capsys, args,
                                                message):
    out = tmp_path / "r.json"
    rc = main(["reasoning", "bench", "--model", str(tiny_folder), "--quiet", "--json",
               str(out), *args])
    assert rc == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1
    assert not out.exists()


def test_generate_takes_its_default_length_from_the_folders_generation_config(
        tiny_folder, tmp_path, capsys):
    import shutil

    folder = tmp_path / "m"
    shutil.copytree(tiny_folder, folder)
    (folder / "generation_config.json").write_text(json.dumps({"max_new_tokens": 6}))
    assert main(["generate", "--model", str(folder), "--prompt", "1 + 2 =", "--json"]) == 0
    row = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert row["nfe"] == 6 and row["tokens_per_forward"] == 1.0
    assert main(["generate", "--model", str(folder), "--prompt", "1 + 2 =", "--json",
                 "--gen-length", "3"]) == 0
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["nfe"] == 3


def test_shipped_text_model_solves_mini_sudoku_and_is_the_generate_default(capsys):
    model = load_model("text", task="text")
    assert model.default_gen_length == 8
    task = TASKS["mini_sudoku"]
    solved = solve(model, task, task.items(10, 0), "confidence")
    assert sum(s.correct for s in solved) >= 8
    assert main(["generate", "--prompt", "Calculate 7 * 8.", "--json"]) == 0
    row = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert row["nfe"] == 8
