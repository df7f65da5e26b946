"""Modelling code written for transformers 4.x, run under 4.x or 5.x.

The code that diffusion LLM checkpoints ship (LLaDA's ``modeling_llada.py``, Dream's
``modeling_dream.py``) was written against transformers 4.x. Under 5.x several things break, and
each is restored here, at load time, without touching the folder's files:

- RoPE's ``"default"`` initialiser left ``ROPE_INIT_FUNCTIONS`` (5.x models compute it
  themselves); code that looks it up (Dream's rotary embedding) gets 4.x's function back.
- 5.x builds the model on the meta device and leaves non-persistent buffers it does not
  know unset: RoPE's inverse frequencies are recomputed after loading.
- ``from_pretrained`` reads attributes that 5.x sets in ``post_init()``
  (``all_tied_weights_keys`` and friends); a model class whose ``__init__`` never calls it
  (LLaDA's) gets it called after its own ``__init__``, and a ``tie_weights()`` written
  without 5.x's keyword arguments accepts (and ignores) them.

Every change adds what is missing and leaves code that already works as it is, so 4.x
folders and 5.x folders load alike. :func:`load_code_class` resolves a folder's own class
and turns a missing Python package in its code into one line naming the package.
"""

from __future__ import annotations

import functools
import inspect
import re
import sys
from pathlib import Path

import torch

from unmask.errors import UnmaskError


def _default_rope_parameters(config=None, device=None, seq_len=None, **kwargs):
    """transformers 4.x's ``_compute_default_rope_parameters``: the original RoPE inverse
    frequencies 1 / theta^(2i/d) and attention factor 1."""
    params = getattr(config, "rope_parameters", None) or {}
    base = params.get("rope_theta", getattr(config, "rope_theta", 10000.0))
    factor = params.get("partial_rotary_factor", getattr(config, "partial_rotary_factor", 1.0))
    head_dim = getattr(config, "head_dim", None) or (config.hidden_size
                                                     // config.num_attention_heads)
    dim = int(head_dim * factor)
    exponents = torch.arange(0, dim, 2, dtype=torch.int64).to(device=device,
                                                               dtype=torch.float) / dim
    return 1.0 / (base ** exponents), 1.0


def prepare_transformers(transformers) -> None:
    """Put back what 4.x modelling code looks up in the installed transformers (idempotent;
    nothing changes under 4.x)."""
    from transformers import modeling_rope_utils

    modeling_rope_utils.ROPE_INIT_FUNCTIONS.setdefault("default", _default_rope_parameters)


def _major(transformers) -> int:
    return int(re.match(r"\d+", transformers.__version__).group())


def _needs_post_init(cls) -> bool:
    return not getattr(cls, "_unmask_post_init", False) and \
        "post_init" not in inspect.getsource(cls.__init__)


def adapt_model_class(transformers, cls) -> None:
    """Make a 4.x model class loadable with the installed ``from_pretrained`` (in place,
    idempotent): ``post_init()`` after ``__init__`` where the class never calls it, and
    ``tie_weights`` that accepts 5.x's keyword arguments."""
    if _major(transformers) < 5:
        return
    try:
        needs_post_init = _needs_post_init(cls)
    except (OSError, TypeError):  # source unavailable: leave the class as it is
        needs_post_init = False
    if needs_post_init:
        init = cls.__init__

        @functools.wraps(init)
        def __init__(self, *args, **kwargs):
            init(self, *args, **kwargs)
            if not hasattr(self, "all_tied_weights_keys"):
                self.post_init()

        cls.__init__ = __init__
        cls._unmask_post_init = True
    tie = cls.__dict__.get("tie_weights")
    if tie is not None and not getattr(tie, "_unmask_adapted", False):
        params = inspect.signature(tie).parameters
        if len(params) == 1:  # (self) only: 5.x passes missing_keys=, recompute_mapping=
            @functools.wraps(tie)
            def tie_weights(self, *args, **kwargs):
                return tie(self)

            tie_weights._unmask_adapted = True
            cls.tie_weights = tie_weights


def load_code_class(transformers, directory: Path, reference: str):
    """The class ``reference`` (``module.Class`` of an ``auto_map``) from the folder's own code,
    adapted (:func:`adapt_model_class`). A package its code imports that is not installed is
    an :class:`UnmaskError` naming it."""
    from transformers.dynamic_module_utils import get_class_from_dynamic_module

    prepare_transformers(transformers)
    try:
        cls = get_class_from_dynamic_module(reference, str(directory), local_files_only=True)
    except ImportError as e:
        raise UnmaskError(f"model: {directory} code needs the Python package "
                          f"{_missing_package(e)}; install it (pip install "
                          f"{_missing_package(e)})") from None
    adapt_model_class(transformers, cls)
    _adapt_generation_configs(transformers, sys.modules.get(cls.__module__))
    return cls


def code_model_loader(transformers, cls):
    """``from_pretrained`` of ``cls`` as transformers defines it: a class that overrides it
    (Dream's, to read its generation config) is loaded by the base method, whose
    ``output_loading_info`` the override does not pass through; the folder's generation
    config is then read with the code's own ``GenerationConfig`` class, as the override
    does."""
    base = transformers.PreTrainedModel.from_pretrained.__func__

    def load(directory, *args, **kwargs):
        loaded = base(cls, directory, *args, **kwargs)
        model = loaded[0] if isinstance(loaded, tuple) else loaded
        _restore_rope_buffers(model)
        honour_attention_mask(model)
        _own_generation_config(transformers, model, Path(directory))
        return loaded

    return load


def _restore_rope_buffers(model) -> None:
    """Recompute RoPE's inverse frequencies of rotary modules written for 4.x: they live in
    a non-persistent buffer, which 5.x leaves uninitialised when it builds the model on the
    meta device (5.x's own models recompute it in their weight initialisation)."""
    for module in model.modules():
        init = getattr(module, "rope_init_fn", None)
        buffer = getattr(module, "inv_freq", None)
        if init is None or not isinstance(buffer, torch.Tensor):
            continue
        inv_freq, _ = init(module.config, buffer.device, **getattr(module, "rope_kwargs", {}))
        with torch.no_grad():
            buffer.copy_(inv_freq.to(buffer.dtype))
        if isinstance(getattr(module, "original_inv_freq", None), torch.Tensor):
            module.original_inv_freq = buffer


def _own_generation_config(transformers, model, directory: Path) -> None:
    module = sys.modules.get(type(model).__module__)
    own = [v for v in (vars(module).values() if module is not None else ())
           if isinstance(v, type) and issubclass(v, transformers.GenerationConfig)
           and v is not transformers.GenerationConfig]
    if own and (directory / "generation_config.json").is_file():
        model.generation_config = own[0].from_pretrained(str(directory), local_files_only=True)


def _adapt_generation_configs(transformers, module) -> None:
    """The folder's own ``GenerationConfig`` subclasses (Dream's) get a ``validate`` that
    accepts the keyword arguments the installed transformers passes (5.x:
    ``user_set_attributes``) and drops those it was not written for."""
    base = transformers.GenerationConfig
    for value in list(vars(module).values()) if module is not None else ():
        validate = getattr(value, "validate", None) if isinstance(value, type) else None
        if (validate is None or not issubclass(value, base) or value is base
                or getattr(validate, "_unmask_adapted", False)):
            continue
        params = inspect.signature(validate).parameters
        if any(p.kind is p.VAR_KEYWORD for p in params.values()):
            continue

        def accepting(self, *args, _validate=validate, _names=frozenset(params), **kwargs):
            return _validate(self, *args, **{k: v for k, v in kwargs.items() if k in _names})

        accepting._unmask_adapted = True
        value.validate = accepting


def _missing_package(e: ImportError) -> str:
    """The package an ImportError is about (transformers' own check lists them)."""
    text = str(e)
    listed = re.search(r"packages that were not found in your environment: ([^.\s]+(?:, "
                       r"[^.\s]+)*)", text)
    if listed:
        return listed.group(1)
    name = getattr(e, "name", None) or (re.findall(r"'([^']+)'", text) or ["?"])[0]
    return name.split(".")[0]


def restore_config_keys(config, meta: dict) -> None:
    """Set the config.json keys ``meta`` that the loaded config lacks as attributes (5.x no
    longer keeps some that 4.x configs did, such as ``use_cache``, and 4.x code reads them)."""
    for key, value in meta.items():
        if key != "auto_map" and not hasattr(config, key):
            setattr(config, key, value)


#: config model types whose attention takes a (B, 1, N, N) boolean mask, not a (B, N) one
FOUR_D_MASK = ("Dream",)


def padding_inputs(hf_model, keep: torch.Tensor, takes_positions: bool) -> dict:
    """The forward's keyword arguments for a left-padded batch: ``keep`` (B, N) bool is
    False at padding. Keys at padding are left out of attention (every query still sees the
    row's real keys, so no row of the softmax is empty); positions count from the first real
    token where the model takes ``position_ids``."""
    kwargs = {}
    if getattr(hf_model.config, "model_type", "") in FOUR_D_MASK:
        n = keep.shape[1]
        kwargs["attention_mask"] = keep[:, None, None, :].expand(-1, 1, n, n)
    else:
        kwargs.update(key_mask_inputs(hf_model, keep))
    if takes_positions:
        kwargs["position_ids"] = (keep.long().cumsum(1) - 1).clamp(min=0)
    return kwargs


def key_mask_inputs(hf_model, keep: torch.Tensor) -> dict:
    """The forward's keyword arguments that leave the keys where ``keep`` (B, N) bool is
    False out of attention: ``attention_mask`` (B, N), or, for LLaDA-style code whose
    attention :func:`honour_attention_mask` masks, none: the mask goes to that hook for the
    next forward (the code's own handling of an ``attention_mask`` reads it on the host, a
    synchronisation on a GPU, to build a bias its attention never uses)."""
    state = getattr(hf_model, "_unmask_key_mask", None)
    if state is None:
        return {"attention_mask": keep.long()}
    state["next"] = keep
    return {}


def honour_attention_mask(model) -> None:
    """Make ``attention_mask`` reach the attention of LLaDA-style code, whose blocks compute
    the mask's bias and then call ``_scaled_dot_product_attention`` with ``attn_mask=None``
    (padding would be attended). A (B, N) ``attention_mask`` given to the model's forward
    becomes the keys' mask of every such call within that forward (keys are the whole row,
    cached ones included), as does one handed over by :func:`key_mask_inputs`; without one,
    or for other code, nothing changes."""
    blocks = [m for m in model.modules()
              if callable(getattr(type(m), "_scaled_dot_product_attention", None))]
    if not blocks or getattr(model, "_unmask_key_mask", None) is not None:
        return
    state: dict = {"keep": None}
    model._unmask_key_mask = state

    def before(module, args, kwargs):
        keep = state.pop("next", None)  # key_mask_inputs's: padding, known to be some
        if keep is None:
            mask = kwargs.get("attention_mask")
            keep = mask.bool() if isinstance(mask, torch.Tensor) and mask.dim() == 2 \
                and not bool(mask.bool().all()) else None
        state["keep"] = keep

    def after(module, args, kwargs, output):
        state["keep"] = None

    model.register_forward_pre_hook(before, with_kwargs=True)
    model.register_forward_hook(after, with_kwargs=True)
    for block in blocks:
        block._scaled_dot_product_attention = _masked_attention(
            block._scaled_dot_product_attention, state)


def _masked_attention(attention, state: dict):
    def masked(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False):
        keep = state["keep"]
        if keep is not None and attn_mask is None and keep.shape[1] == k.shape[-2]:
            attn_mask = keep[:, None, None, :]
        return attention(q, k, v, attn_mask=attn_mask, dropout_p=dropout_p,
                         is_causal=is_causal)

    return masked
