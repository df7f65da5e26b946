"""LLaDA's and Dream's own modelling code (as their checkpoint folders ship it, written for
transformers 4.x) loads through unmask under the installed transformers, 4.x or 5.x, and
computes what the module itself computes."""

import json

import pytest
import torch
from dllm_models import import_model_class, require_external, write_dream, write_llada
from safetensors.torch import load_file

from unmask.cli import main
from unmask.models.auto import load_model

# LLaDA's code wraps its attention in torch.compile: compiling every new shape on a CPU
# costs seconds, so these tests run it eagerly (conftest)
pytestmark = pytest.mark.usefixtures("eager_attention")
WRITERS = {"llada": write_llada, "dream": write_dream}


@pytest.fixture(scope="module", params=["llada", "dream"])
def family_dir(request, tmp_path_factory):
    require_external()
    return request.param, WRITERS[request.param](tmp_path_factory.mktemp(request.param) / "m")


def _module_logits(path, family, x):
    """The folder's class built directly (no from_pretrained) with the saved weights."""
    import transformers

    from unmask.models.hf_compat import prepare_transformers, restore_config_keys

    prepare_transformers(transformers)
    cls = import_model_class(path, family)
    meta = json.loads((path / "config.json").read_text())
    drop = ("auto_map", "architectures", "model_type")
    config = cls.config_class(**{k: v for k, v in meta.items() if k not in drop})
    restore_config_keys(config, meta)
    if family == "dream":
        config._attn_implementation = "sdpa"
    module = (cls(config, init_params=False) if family == "llada" else cls(config)).eval()
    module.load_state_dict(load_file(str(path / "model.safetensors")))
    with torch.no_grad():
        logits = module(x).logits
    return torch.cat([logits[:, :1], logits[:, :-1]], 1) if family == "dream" else logits


def test_loads_and_matches_the_module(family_dir):
    family, path = family_dir
    model = load_model(path, trust_remote_code=True)
    assert type(model.hf).__name__ == {"llada": "LLaDAModelLM", "dream": "DreamModel"}[family]
    assert model.mask_id == 93 and model.eos_ids == (2,) and model.pad_id == 0
    assert model.shift_logits == (family == "dream")
    x = torch.tensor([[5, 17, 33, 93, 93, 93, 2]])
    with torch.no_grad():
        got = model(x).logits
    torch.testing.assert_close(got, _module_logits(path, family, x), rtol=1e-5, atol=1e-5)


def test_cli_generate_runs_the_folder_code(family_dir, capsys):
    _, path = family_dir
    rc = main(["generate", "--model", str(path), "--trust-remote-code", "--prompt", "w5 w6 w7",
               "--gen-length", "8", "--block-length", "4", "--steps", "8", "--json",
               "--no-eos-stop"])
    out = capsys.readouterr().out.strip().splitlines()
    assert rc == 0 and len(out) == 1
    row = json.loads(out[0])
    assert row["nfe"] == 8 and row["prompt"] == "w5 w6 w7"


def test_real_vocabulary_size_loads(tmp_path, capsys):
    """LLaDA-8B's vocabulary (126,464 ids, mask 126,336) at toy width."""
    path = write_llada(tmp_path / "big", vocab_size=126464, mask_id=126336, d_model=16,
                       n_layers=1, n_heads=2)
    model = load_model(path, trust_remote_code=True)
    assert model.vocab_size == 126464 and model.mask_id == 126336
    assert len(model.real_token_ids) == 126464 - 3
    rc = main(["generate", "--model", str(path), "--trust-remote-code", "--prompt", "w5 w9",
               "--gen-length", "4", "--json", "--no-eos-stop"])
    assert rc == 0 and json.loads(capsys.readouterr().out)["nfe"] == 4


def test_missing_package_is_one_line(tmp_path, capsys):
    path = write_llada(tmp_path / "m", n_layers=1)
    code = (path / "modeling_llada.py").read_text()
    (path / "modeling_llada.py").write_text("import unmask_absent_pkg  # noqa\n" + code)
    rc = main(["generate", "--model", str(path), "--trust-remote-code", "--prompt", "w5",
               "--gen-length", "4"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1
    assert "unmask_absent_pkg" in err and err.startswith("error: model:")


def test_without_trust_remote_code_is_refused(family_dir, capsys):
    _, path = family_dir
    rc = main(["generate", "--model", str(path), "--prompt", "w5", "--gen-length", "4"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and "--trust-remote-code" in err and len(err.splitlines()) == 1
