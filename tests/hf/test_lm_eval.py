"""The `unmask` lm-eval model type: generate_until on a tiny local JSONL task, offline."""

import json
import os
import re

import pytest
import torch

lm_eval = pytest.importorskip("lm_eval")
os.environ["HF_DATASETS_OFFLINE"] = "1"

from lm_eval.api.instance import Instance  # noqa: E402
from lm_eval.api.registry import get_model  # noqa: E402

from unmask.generate import generate  # noqa: E402
from unmask.lm_eval_model import UnmaskLM  # noqa: E402

DOCS = [{"question": "the cat", "answer": "sat"}, {"question": "a dog ran", "answer": "on"},
        {"question": "hello", "answer": "world"}]


def _write_task(folder):
    """A generate_until task over DOCS as a local JSONL file (no download)."""
    data = folder / "data.jsonl"
    data.write_text("".join(json.dumps(d) + "\n" for d in DOCS))
    (folder / "tiny.yaml").write_text(f"""task: unmask_tiny
dataset_path: json
dataset_kwargs:
  data_files:
    test: {data}
test_split: test
output_type: generate_until
doc_to_text: "{{{{question}}}}"
doc_to_target: "{{{{answer}}}}"
generation_kwargs:
  until: ["\\n"]
  max_gen_toks: 8
metric_list:
  - metric: exact_match
""")


def make_lm(llada_dir, **extra):
    args = {"pretrained": str(llada_dir), "trust_remote_code": "True", "gen_length": 8,
            "block_length": 4, "sampler": "eb:gamma=0.5;order=confidence", **extra}
    return get_model("unmask")(**args)


def test_generate_until_is_unmask_generate_cut_at_until(llada_dir):
    lm = make_lm(llada_dir, batch_size=2)
    assert isinstance(lm, UnmaskLM)
    reqs = [Instance("generate_until", d, (d["question"], {"until": ["."]}), i)
            for i, d in enumerate(DOCS)]
    got = lm.generate_until(reqs)
    want = generate(lm.model, None, [d["question"] for d in DOCS],
                    sampler="eb:gamma=0.5,order=confidence", gen_length=8, block_length=4)
    assert got == [w.text.split(".")[0] for w in want]
    assert lm.nfe == [w.nfe for w in want]
    with pytest.raises(NotImplementedError, match="likelihood requests are not implemented"):
        lm.loglikelihood(reqs)


def test_min_new_tokens_model_arg(llada_dir):
    lm = make_lm(llada_dir, min_new_tokens="6", sampler="confidence")
    with torch.no_grad():
        lm.model.hf.head.bias[2] += 50.0  # every position now predicts EOS
    reqs = [Instance("generate_until", d, (d["question"], {"until": []}), i)
            for i, d in enumerate(DOCS)]
    got = lm.generate_until(reqs)
    want = generate(lm.model, None, [d["question"] for d in DOCS], gen_length=8,
                    block_length=4, min_new_tokens=6)
    assert got == [w.text for w in want] and all(len(t.split()) == 6 for t in got)
    lm.request = lm.request.replace(min_new_tokens=0)
    assert lm.generate_until(reqs) == ["", "", ""]


@pytest.mark.slow
def test_lm_eval_end_to_end_on_a_local_task(llada_dir, tmp_path):
    _write_task(tmp_path)
    from lm_eval import simple_evaluate
    from lm_eval.tasks import TaskManager

    out = simple_evaluate(
        model="unmask", tasks=["unmask_tiny"],
        model_args=f"pretrained={llada_dir},trust_remote_code=True,gen_length=8,"
                   "block_length=4,sampler=eb:gamma=0.1",
        task_manager=TaskManager(include_path=str(tmp_path)), log_samples=True)
    res = out["results"]["unmask_tiny"]
    assert 0.0 <= res["exact_match,none"] <= 1.0
    assert len(out["samples"]["unmask_tiny"]) == 3


@pytest.mark.parametrize("arg_string, needle", [
    ("gen_length=abc", "gen_length: expected an integer"),
    ("steps=abc", "steps: expected an integer"),
    ("gen_length=0", "gen_length: must be >= 1"),
    ("gen_length=True", "gen_length: expected an integer"),
    ("temperature=nan", "temperature: must be a finite number"),
    ("batch_size=0", "batch_size: must be >= 1"),
    ("chat_template=maybe", "chat_template: expected true or false"),
    ("genlength=8", "unknown key 'genlength'"),
])
def test_bad_model_args_are_one_line(llada_dir, arg_string, needle):
    """Every --model_args value goes through the CLI's typed parsers; misspelt keys are
    refused rather than ignored."""
    from unmask.errors import UnmaskError

    base = f"pretrained={llada_dir},trust_remote_code=True,"
    with pytest.raises(UnmaskError, match=needle):
        UnmaskLM.create_from_arg_string(base + arg_string, {"batch_size": 1})


def test_batch_size_from_either_place(llada_dir):
    base = f"pretrained={llada_dir},trust_remote_code=True,gen_length=8"
    assert UnmaskLM.create_from_arg_string(base, {"batch_size": 3}).batch_size == 3
    lm = UnmaskLM.create_from_arg_string(base + ",batch_size=2",
                                         {"batch_size": 1, "max_batch_size": None,
                                          "device": "cpu"})
    assert lm.batch_size == 2 and lm.request.gen_length == 8
    assert UnmaskLM.create_from_arg_string(base, {"batch_size": "auto:4"}).batch_size == 1
    from unmask.errors import UnmaskError

    with pytest.raises(UnmaskError, match="batch_size: must be >= 1"):
        UnmaskLM.create_from_arg_string(base, {"batch_size": 0})
    with pytest.raises(UnmaskError, match="device=cuda conflicts with --device cpu"):
        UnmaskLM.create_from_arg_obj({"pretrained": str(llada_dir), "device": "cuda"},
                                     {"device": "cpu"})
    # lm-eval's command line reads gen_length=-4 as the float -4.0: the refusal says -4
    with pytest.raises(UnmaskError, match=r"gen_length: must be >= 1, got -4$"):
        UnmaskLM.create_from_arg_obj({"pretrained": str(llada_dir), "gen_length": -4.0})


def test_lm_eval_command_line_refuses_bad_args_in_one_line(llada_dir, tmp_path):
    import subprocess
    import sys

    _write_task(tmp_path)
    proc = subprocess.run([sys.executable, "-m", "unmask.lm_eval_model", "--model", "unmask",
                           "--model_args", f"pretrained={llada_dir},steps=abc",
                           "--tasks", "unmask_tiny", "--include_path", str(tmp_path),
                           "--batch_size", "1"],
                          capture_output=True, text=True, timeout=300,
                          env={**os.environ, "HF_DATASETS_OFFLINE": "1"})
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert proc.stderr.strip().splitlines()[-1] == ("error: model_args: steps: expected an "
                                                    "integer >= 1, got 'abc'")


def test_constraint_model_args(tmp_path):
    """regex=, choice= and json_schema=FILE constrain every request's text (what generate
    gives with that constraint); several at once, or a bad one, are refused in one line."""
    from unmask import constraints
    from unmask.errors import UnmaskError

    def text_lm(**extra):  # the shipped character-level text MDM
        return get_model("unmask")(pretrained="text", gen_length=8, block_length=8, **extra)

    reqs = [Instance("generate_until", d, (d["question"], {"until": []}), i)
            for i, d in enumerate(DOCS)]
    lm = text_lm(choice="yes;no;12")
    got = lm.generate_until(reqs)
    assert set(got) <= {"yes", "no", "12"}
    assert lm.request.constraint == constraints.choice("yes", "no", "12")
    want = generate(lm.model, None, [d["question"] for d in DOCS], lm.request)
    assert got == [w.text for w in want]
    got = text_lm(regex="[0-9]{2,3}").generate_until(reqs)
    assert all(re.fullmatch("[0-9]{2,3}", t) for t in got), got
    schema = tmp_path / "s.json"
    schema.write_text('{"enum": ["sat", "on"]}')
    assert text_lm(json_schema=str(schema)).request.constraint.kind == "json_schema"
    with pytest.raises(UnmaskError, match="give one of regex, choice, not several"):
        text_lm(regex="sat", choice="sat;on")
    with pytest.raises(UnmaskError, match="regex: "):
        text_lm(regex="(")
    with pytest.raises(UnmaskError, match="json_schema: cannot read"):
        text_lm(json_schema=str(tmp_path / "none.json"))
