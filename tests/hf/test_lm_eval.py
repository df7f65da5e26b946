"""The `unmask` lm-eval model type: generate_until on a tiny local JSONL task, offline."""

import json
import os

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
    lm.min_new_tokens = 0
    assert lm.generate_until(reqs) == ["", "", ""]


@pytest.mark.slow
def test_lm_eval_end_to_end_on_a_local_task(llada_dir, tmp_path):
    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps(d) + "\n" for d in DOCS))
    (tmp_path / "tiny.yaml").write_text(f"""task: unmask_tiny
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
