"""Tiny random LLaDA and Dream checkpoints built from the modelling code those checkpoints
ship with (``../shared/external/fast-dllm``, Apache-2.0, used in place and never copied into
the project): the code files are copied into a temporary folder beside a config.json whose
``auto_map`` names them, random weights (model.safetensors) and a word-level tokenizer that
covers every id of the vocabulary.

The weights are written with safetensors from the module's own ``state_dict()`` (no
``save_pretrained``), so building needs only the modelling code to construct, which works
under transformers 4.x and 5.x alike; loading is what :mod:`unmask` has to make work.
Logits are made peaked (well separated confidences) and the ids no reference may emit
(pad, mask, bos) get a zero output row, far below the peaks, so that the reference's
softmax over the whole vocabulary and unmask's over its real tokens rank alike.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import shutil
import sys
import types
from pathlib import Path

import torch
from safetensors.torch import save_file


def _external() -> Path:
    """The reference code: ``$UNMASK_FASTDLLM``, else ../shared/external/fast-dllm from the
    repository root, else shared/external/fast-dllm inside it (the first that exists)."""
    root = Path(__file__).resolve().parents[2]
    places = [os.environ.get("UNMASK_FASTDLLM"), root.parent / "shared" / "external" /
              "fast-dllm", root / "shared" / "external" / "fast-dllm"]
    return next((Path(p) for p in places if p and Path(p).is_dir()), Path(places[1]))


#: Fast-dLLM's code folder (:func:`_external`)
EXTERNAL = _external()

#: special ids of the tiny checkpoints: pad, bos, eos ("end of turn"), mask
PAD, BOS, EOS = 0, 1, 2


def require_external():
    """Skip the calling test when the reference code or einops is absent; outside pytest (the
    benchmarks, on machines without it) raise RuntimeError saying which."""
    if not EXTERNAL.is_dir():
        missing = f"the reference modelling code is absent ({EXTERNAL})"
    elif importlib.util.find_spec("einops") is None:
        missing = "einops is not installed (LLaDA's modelling code imports it)"
    else:
        return
    pytest = sys.modules.get("pytest")  # imported: a test run
    if pytest is not None:
        pytest.skip(missing)
    raise RuntimeError(missing)


def word_tokenizer(vocab_size: int, mask_id: int):
    """A word-level tokenizer whose ids are exactly 0..vocab_size-1: pad, bos, eos, mask at
    their ids and words ``w3``, ``w4``, ... elsewhere (a prompt is a string of those)."""
    import tokenizers
    import transformers

    names = {PAD: "<|pad|>", BOS: "<|bos|>", EOS: "<|eot|>", mask_id: "<|mask|>"}
    vocab = {names.get(i, f"w{i}"): i for i in range(vocab_size)}
    tok = tokenizers.Tokenizer(tokenizers.models.WordLevel(vocab, unk_token="<|pad|>"))
    tok.pre_tokenizer = tokenizers.pre_tokenizers.Whitespace()
    fast = transformers.PreTrainedTokenizerFast(
        tokenizer_object=tok, pad_token=names[PAD], bos_token=names[BOS],
        eos_token=names[EOS], mask_token=names[mask_id])
    # an Instruct folder's tokenizer carries a chat template (here: BOS, then the messages)
    fast.chat_template = ("{{ bos_token }}{% for m in messages %}{{ m['content'] }} "
                          "{% endfor %}")
    return fast


def _import_folder(path: Path, modules: list[str]):
    """Import the code files ``modules`` of ``path`` as one package (relative imports work)."""
    name = f"dllm_{abs(hash(str(path)))}"
    spec = importlib.util.spec_from_file_location(name, path / "__init__.py",
                                                  submodule_search_locations=[str(path)])
    pkg = importlib.util.module_from_spec(spec)
    sys.modules[name] = pkg
    return [importlib.import_module(f"{name}.{m}") for m in modules]


def _randomise(model: torch.nn.Module, head: torch.Tensor, silent: list[int], seed: int):
    """Weights ~ N(0, 1/fan_in) (norm gains 1), a peaked output head (x4), zero head rows for
    ``silent`` ids."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in sorted(model.named_parameters()):
            if p.dim() >= 2:
                p.copy_(torch.randn(p.shape, generator=gen) / p.shape[-1] ** 0.5)
            elif "norm" in name or name.endswith(("ln_f.weight", "_norm.weight")):
                p.fill_(1.0)
            else:
                p.copy_(torch.randn(p.shape, generator=gen) * 0.1)
        head.mul_(4.0)
        head[silent] = 0.0


def _finish(path: Path, model, meta: dict, tok) -> Path:
    state = {k: v.contiguous() for k, v in model.state_dict().items()}
    save_file(state, str(path / "model.safetensors"), metadata={"format": "pt"})
    (path / "config.json").write_text(json.dumps(meta, indent=1))
    tok.save_pretrained(str(path))
    return path


LLADA_CONFIG = {
    "activation_type": "silu", "alibi": False, "alibi_bias_max": 8.0,
    "architectures": ["LLaDAModelLM"], "attention_dropout": 0.0, "attention_layer_norm": False,
    "attention_layer_norm_with_affine": True, "bias_for_layer_norm": False,
    "block_group_size": 1, "block_type": "llama", "embedding_dropout": 0.0,
    "flash_attention": False, "include_bias": False, "include_qkv_bias": False,
    "init_cutoff_factor": None, "init_device": "meta", "init_fn": "mitchell",
    "init_std": 0.02, "input_emb_norm": False, "layer_norm_type": "rms",
    "layer_norm_with_affine": True, "mlp_ratio": 4, "model_type": "llada",
    "multi_query_attention": None, "precision": "amp_bf16", "residual_dropout": 0.0,
    "rms_norm_eps": 1e-05, "rope": True, "rope_full_precision": True,
    "rope_theta": 500000.0, "scale_logits": False, "use_cache": False, "weight_tying": False,
    "auto_map": {"AutoConfig": "configuration_llada.LLaDAConfig",
                 "AutoModel": "modeling_llada.LLaDAModelLM",
                 "AutoModelForCausalLM": "modeling_llada.LLaDAModelLM"},
}


def write_llada(path: Path, *, vocab_size: int = 96, mask_id: int = 93, d_model: int = 64,
                n_layers: int = 2, n_heads: int = 4, seed: int = 0) -> Path:
    """A LLaDA-8B-shaped folder (its config keys, llama blocks, RoPE, no weight tying) with
    LLaDA's own modelling code, at toy size. The real model: vocab 126,464, mask id 126,336."""
    require_external()
    path.mkdir(parents=True, exist_ok=True)
    for f in ("modeling_llada.py", "configuration_llada.py"):
        shutil.copy(EXTERNAL / "llada" / f, path / f)
    (path / "__init__.py").write_text("")
    meta = dict(LLADA_CONFIG, d_model=d_model, n_layers=n_layers, n_heads=n_heads,
                n_kv_heads=n_heads, mlp_hidden_size=2 * d_model, max_sequence_length=512,
                vocab_size=vocab_size, embedding_size=vocab_size, mask_token_id=mask_id,
                eos_token_id=EOS, pad_token_id=PAD)
    cfg_mod, mod = _import_folder(path, ["configuration_llada", "modeling_llada"])
    config = cfg_mod.LLaDAConfig(**{k: v for k, v in meta.items() if k != "auto_map"})
    model = mod.LLaDAModelLM(config, init_params=False).eval()
    head = model.model.transformer.ff_out.weight
    _randomise(model, head.data, [PAD, BOS, mask_id], seed)
    return _finish(path, model, meta, word_tokenizer(vocab_size, mask_id))


def write_dream(path: Path, *, vocab_size: int = 96, mask_id: int = 93, hidden: int = 64,
                layers: int = 2, heads: int = 4, seed: int = 0) -> Path:
    """A Dream-7B-shaped folder (Qwen2 blocks, shifted logits) with Dream's own modelling
    and generation code, at toy size. The real model: vocab 152,064, mask id 151,666."""
    require_external()
    path.mkdir(parents=True, exist_ok=True)
    for f in ("modeling_dream.py", "configuration_dream.py", "generation_utils.py"):
        shutil.copy(EXTERNAL / "dream" / f, path / f)
    (path / "__init__.py").write_text("")
    meta = {"architectures": ["DreamModel"], "model_type": "Dream",
            "auto_map": {"AutoConfig": "configuration_dream.DreamConfig",
                         "AutoModel": "modeling_dream.DreamModel"},
            "vocab_size": vocab_size, "hidden_size": hidden, "intermediate_size": 2 * hidden,
            "num_hidden_layers": layers, "num_attention_heads": heads,
            "num_key_value_heads": heads // 2, "hidden_act": "silu",
            "max_position_embeddings": 512, "rms_norm_eps": 1e-6, "rope_theta": 10000.0,
            "rope_scaling": None, "tie_word_embeddings": False, "use_cache": False,
            "attention_dropout": 0.0, "mask_token_id": mask_id, "pad_token_id": PAD,
            "bos_token_id": BOS, "eos_token_id": EOS, "torch_dtype": "float32"}
    import transformers

    from unmask.models.hf_compat import prepare_transformers

    prepare_transformers(transformers)  # Dream's rotary embedding looks up RoPE "default"
    cfg_mod, mod = _import_folder(path, ["configuration_dream", "modeling_dream"])
    config = cfg_mod.DreamConfig(**{k: v for k, v in meta.items()
                                    if k not in ("auto_map", "architectures", "model_type")})
    config._attn_implementation = "sdpa"
    model = mod.DreamModel(config).eval()
    _randomise(model, model.lm_head.weight.data, [PAD, BOS, mask_id], seed)
    # Dream's from_pretrained reads its DreamGenerationConfig from here (the real folder has one)
    (path / "generation_config.json").write_text(json.dumps(
        {"bos_token_id": BOS, "eos_token_id": EOS, "pad_token_id": PAD,
         "mask_token_id": mask_id}))
    return _finish(path, model, meta, word_tokenizer(vocab_size, mask_id))


def import_model_class(path: Path, family: str):
    """The folder's own model class (for running the reference generate functions)."""
    if family == "llada":
        return _import_folder(path, ["configuration_llada", "modeling_llada"])[1].LLaDAModelLM
    return _import_folder(path, ["configuration_dream", "modeling_dream"])[1].DreamModel


def fastdllm_generate():
    """Fast-dLLM's ``llada/generate.py`` as a module. It imports
    ``model.modeling_llada.LLaDAModelLM`` at the top (used only by its ``main``): a stub
    module stands in while it loads."""
    require_external()
    if "fastdllm_generate" in sys.modules:
        return sys.modules["fastdllm_generate"]
    stub_pkg, stub = types.ModuleType("model"), types.ModuleType("model.modeling_llada")
    stub.LLaDAModelLM = None
    saved = {k: sys.modules.get(k) for k in ("model", "model.modeling_llada")}
    sys.modules.update({"model": stub_pkg, "model.modeling_llada": stub})
    try:
        spec = importlib.util.spec_from_file_location("fastdllm_generate",
                                                      EXTERNAL / "llada" / "generate.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        for k, v in saved.items():
            if v is None:
                sys.modules.pop(k, None)
            else:
                sys.modules[k] = v
    sys.modules["fastdllm_generate"] = module
    return module


def dream_counts(masked: int, steps: int, eps: float) -> list[int]:
    """Positions Dream's ``diffusion_generate`` reveals per step from ``masked`` masked
    positions (its ``_sample``'s own float32 arithmetic: ``int(M * (1 - s/t))`` on
    ``linspace(1, eps, steps + 1)``, the rest at the last step)."""
    timesteps = torch.linspace(1, eps, steps + 1)
    out = []
    for i in range(steps):
        t, s = timesteps[i], timesteps[i + 1]
        m = torch.tensor(float(masked))
        n = int(m * (1 - s / t)) if i < steps - 1 else int(m)
        out.append(n)
        masked -= n
    return out


#: LLaDA-8B's shape (d_model 4,096, 32 layers and heads, MLP 12,288, vocab 126,464)
LLADA_8B = {"vocab_size": 126464, "mask_id": 126336, "d_model": 4096, "n_layers": 32,
            "n_heads": 32, "mlp_hidden": 12288}
#: Dream-7B's shape (Qwen2-7B: hidden 3,584, 28 layers, 28 heads, 4 KV heads, MLP 18,944)
DREAM_7B = {"vocab_size": 152064, "mask_id": 151666, "hidden": 3584, "layers": 28,
            "heads": 28, "kv_heads": 4, "intermediate": 18944}


def _randomise_on(model: torch.nn.Module, head: torch.Tensor, silent: list[int], seed: int,
                  sharpen: float):
    """As :func:`_randomise`, drawn on the parameters' own device (an 8 B model is built in
    place on a GPU, never on the host); the head scaled by ``sharpen``."""
    with torch.no_grad():
        for name, p in sorted(model.named_parameters()):
            gen = torch.Generator(device=p.device).manual_seed(seed + len(name))
            if p.dim() >= 2:
                p.normal_(0.0, p.shape[-1] ** -0.5, generator=gen)
            elif "norm" in name or name.endswith(("ln_f.weight", "_norm.weight")):
                p.fill_(1.0)
            else:
                p.normal_(0.0, 0.1, generator=gen)
        head.mul_(sharpen)
        head[silent] = 0.0


class _default_dtype:
    def __init__(self, dtype):
        self.dtype, self.saved = dtype, None

    def __enter__(self):
        self.saved = torch.get_default_dtype()
        torch.set_default_dtype(self.dtype)

    def __exit__(self, *exc):
        torch.set_default_dtype(self.saved)


def llada_in_place(path: Path, *, device="cpu", dtype=torch.float32, vocab_size: int = 96,
                   mask_id: int = 93, d_model: int = 64, n_layers: int = 2, n_heads: int = 4,
                   mlp_hidden: int | None = None, seed: int = 0, sharpen: float = 4.0):
    """(model, tokenizer): a random LLaDA-shaped module (LLaDA's own code, imported from a
    folder ``path`` that holds only the code and config) with its parameters created and
    drawn on ``device`` in ``dtype`` (nothing written, nothing on the host), and the word
    tokenizer. ``LLADA_8B`` gives the real shape."""
    require_external()
    path.mkdir(parents=True, exist_ok=True)
    for f in ("modeling_llada.py", "configuration_llada.py"):
        shutil.copy(EXTERNAL / "llada" / f, path / f)
    (path / "__init__.py").write_text("")
    meta = dict(LLADA_CONFIG, d_model=d_model, n_layers=n_layers, n_heads=n_heads,
                n_kv_heads=n_heads, mlp_hidden_size=mlp_hidden or 2 * d_model,
                max_sequence_length=4096, vocab_size=vocab_size, embedding_size=vocab_size,
                mask_token_id=mask_id, eos_token_id=EOS, pad_token_id=PAD,
                init_device=str(device))
    (path / "config.json").write_text(json.dumps(meta, indent=1))
    cfg_mod, mod = _import_folder(path, ["configuration_llada", "modeling_llada"])
    config = cfg_mod.LLaDAConfig(**{k: v for k, v in meta.items() if k != "auto_map"})
    with _default_dtype(dtype), torch.device(device):
        model = mod.LLaDAModelLM(config, init_params=False).eval()
    _randomise_on(model, model.model.transformer.ff_out.weight.data, [PAD, BOS, mask_id],
                  seed, sharpen)
    from unmask.models.hf_compat import honour_attention_mask, restore_config_keys

    restore_config_keys(model.config, meta)  # as loading the folder does (use_cache, ...)
    honour_attention_mask(model)
    return model, word_tokenizer(vocab_size, mask_id)


def dream_in_place(path: Path, *, device="cpu", dtype=torch.float32, vocab_size: int = 96,
                   mask_id: int = 93, hidden: int = 64, layers: int = 2, heads: int = 4,
                   kv_heads: int = 2, intermediate: int | None = None, seed: int = 0,
                   sharpen: float = 4.0):
    """(model, tokenizer): a random Dream-shaped module (Dream's own code) built in place on
    ``device`` in ``dtype``, as :func:`llada_in_place`; ``DREAM_7B`` gives the real shape."""
    require_external()
    path.mkdir(parents=True, exist_ok=True)
    for f in ("modeling_dream.py", "configuration_dream.py", "generation_utils.py"):
        shutil.copy(EXTERNAL / "dream" / f, path / f)
    (path / "__init__.py").write_text("")
    import transformers

    from unmask.models.hf_compat import prepare_transformers

    prepare_transformers(transformers)
    cfg_mod, mod = _import_folder(path, ["configuration_dream", "modeling_dream"])
    config = cfg_mod.DreamConfig(
        vocab_size=vocab_size, hidden_size=hidden, intermediate_size=intermediate or 2 * hidden,
        num_hidden_layers=layers, num_attention_heads=heads, num_key_value_heads=kv_heads,
        hidden_act="silu", max_position_embeddings=4096, rms_norm_eps=1e-6,
        rope_theta=10000.0, rope_scaling=None, tie_word_embeddings=False, use_cache=False,
        attention_dropout=0.0, mask_token_id=mask_id, pad_token_id=PAD, bos_token_id=BOS,
        eos_token_id=EOS)
    config._attn_implementation = "sdpa"
    with _default_dtype(dtype), torch.device(device):
        model = mod.DreamModel(config).eval()
    _randomise_on(model, model.lm_head.weight.data, [PAD, BOS, mask_id], seed, sharpen)
    gen_mod = importlib.import_module(mod.__name__.rsplit(".", 1)[0] + ".generation_utils")
    from unmask.models.hf_compat import _adapt_generation_configs

    _adapt_generation_configs(transformers, gen_mod)  # as loading the folder does
    model.generation_config = gen_mod.DreamGenerationConfig(
        bos_token_id=BOS, eos_token_id=EOS, pad_token_id=PAD, mask_token_id=mask_id)
    return model, word_tokenizer(vocab_size, mask_id)
