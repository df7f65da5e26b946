"""Any ``transformers`` masked LM, or a diffusion LLM whose modelling code sits in its folder
(LLaDA arXiv:2502.09992, Dream arXiv:2508.15487), behind the :class:`MaskedModel` contract.

Rows are the model's own token ids. Given context may hold any id (prompt, special tokens);
samplers emit only the *real* tokens: the tokenizer's vocabulary without its special tokens,
plus the end-of-sequence ids (so generation can stop). ``pad_id`` marks left padding: a
position holding it is left out of attention and the positions after it are counted from the
first non-pad token, so a padded row gives the logits of the unpadded one.

Nothing is downloaded (``local_files_only=True``). Modelling code shipped inside a folder
(``auto_map`` in config.json) runs only with ``trust_remote_code=True`` and only from that
folder: a folder whose ``auto_map`` points elsewhere, or whose code file is absent, is refused.
"""

from __future__ import annotations

import contextlib
import inspect
import json
import os
import pickle
import re
from pathlib import Path

import torch
from safetensors import SafetensorError

from unmask.devices import check_device
from unmask.errors import UnmaskError, require
from unmask.models.base import MaskedModel, ModelOutput
from unmask.models.files import read_json_object
from unmask.models.hf_compat import (
    code_model_loader,
    load_code_class,
    padding_inputs,
    prepare_transformers,
    restore_config_keys,
)
from unmask.validation import is_int

#: config.json model types whose logits at position i predict token i+1 (AR-initialised)
SHIFTED_LOGITS = ("Dream",)
_WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin",
                 "pytorch_model.bin.index.json")
_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "vocab.json",
                    "tokenizer.model", "spiece.model")
#: model types whose position ids start after ``pad_token_id`` (RoBERTa's convention)
_OFFSET_POSITIONS = ("roberta", "xlm-roberta", "camembert", "roberta-prelayernorm",
                     "data2vec-text", "xmod")
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def import_transformers():
    try:
        import transformers
    except ImportError:
        raise UnmaskError("model: Hugging Face folders need transformers; pip install "
                          "'unmask[hf]'") from None
    transformers.utils.logging.disable_progress_bar()
    transformers.utils.logging.set_verbosity_error()
    return transformers


def _first_line(e: BaseException) -> str:
    return (str(e).strip().splitlines() or [type(e).__name__])[0][:300]


_MODULE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _auto_map_refs(directory: Path, auto_map, where: str) -> list[str]:
    """The class references of one ``auto_map`` (config.json's or tokenizer_config.json's),
    each checked to be ``module.Class`` with ``module.py`` a file strictly inside the folder."""
    require(isinstance(auto_map, dict),
            f"model: {directory} {where} auto_map must be an object of class references, "
            f"got a JSON {type(auto_map).__name__}")
    refs = []
    for key, value in auto_map.items():
        values = value if isinstance(value, list) else [value]
        for ref in values:
            if ref is None:  # a tokenizer's absent slow or fast class
                continue
            require(isinstance(ref, str) and ref,
                    f"model: {directory} {where} auto_map[{key!r}] must be a class reference "
                    f"'module.Class', got {json.dumps(ref)}")
            module, _, name = ref.rpartition(".")
            require("--" not in ref and bool(_MODULE_NAME.fullmatch(module))
                    and bool(_MODULE_NAME.fullmatch(name)),
                    f"model: {directory} {where} auto_map[{key!r}] = {ref!r} points outside "
                    "the folder (expected 'module.Class' of a file in it); only code inside the "
                    "folder is run")
            path = directory / f"{module}.py"
            require(path.is_file(), f"model: {directory} {where} names code {module}.py that "
                                    "is not in the folder")
            refs.append(ref)
    return refs


def check_remote_code(directory: Path, meta: dict, trust_remote_code: bool) -> bool:
    """Refuse a folder whose ``auto_map`` code (config.json's or tokenizer_config.json's) is
    not a file strictly inside the folder, or that needs code without ``trust_remote_code``.

    A reference is ``module.Class`` with a plain module name (no path, no ``..``, no other
    repository's ``repo--module``); every ``*.py`` of a folder that runs code must resolve
    inside the folder (no symlink leaving it), since the modules import their siblings."""
    maps = [("config.json", meta["auto_map"])] if "auto_map" in meta else []
    tokenizer_config = directory / "tokenizer_config.json"
    if tokenizer_config.is_file():
        tok_meta = read_json_object(tokenizer_config)
        if "auto_map" in tok_meta:
            maps.append(("tokenizer_config.json", tok_meta["auto_map"]))
    refs = [r for where, auto_map in maps for r in _auto_map_refs(directory, auto_map, where)]
    if not refs:
        return False
    root = directory.resolve()
    for code in sorted(directory.glob("*.py")):
        require(code.resolve().is_relative_to(root),
                f"model: {directory} code file {code.name} is a link to outside the folder; "
                "only code inside the folder is run")
    require(trust_remote_code,
            f"model: {directory} runs its own modelling code ({', '.join(sorted(set(refs)))});"
            " allow it with trust_remote_code=True (--trust-remote-code)")
    return True


def _accepts(fn, name: str) -> bool:
    params = inspect.signature(fn).parameters
    return name in params or any(p.kind is p.VAR_KEYWORD for p in params.values())


class HFMaskedModel(MaskedModel):
    """A loaded ``transformers`` model behind :class:`MaskedModel`.

    Args:
        hf_model: the model; ``hf_model(input_ids=...)`` returns ``.logits`` (B, N, V).
        tokenizer: its tokenizer (None: real tokens from the config's ids alone).
        mask_id: the mask token id (default: the tokenizer's, else the config's
            ``mask_token_id``).
        max_length: longest row (default: the smallest limit the folder states: the
            tokenizer's ``model_max_length`` when finite, the config's
            ``max_position_embeddings`` / ``max_sequence_length`` / ``n_positions``).
        hidden_layer: which of the model's hidden states is ``ModelOutput.hidden`` (-1: last).
        shift_logits: the model's logits at i predict token i+1 (Dream); they are shifted
            back by one (default: from the config's model type).

    A config whose ``causal`` is true (a position attends to itself and the positions
    before it only) makes the model ``block_causal`` (1): the decode loop then runs it on the
    row up to the end of the current block, as diffusers' ``LLaDA2Pipeline`` does.
    """

    def __init__(self, hf_model, tokenizer=None, *, mask_id: int | None = None,
                 max_length: int | None = None, hidden_layer: int = -1,
                 shift_logits: bool | None = None):
        super().__init__()
        self.hf = hf_model.eval()
        self.tokenizer = tokenizer
        cfg = hf_model.config
        self.task = "text"
        self.vocab_size = int(getattr(cfg, "vocab_size", 0) or
                              hf_model.get_output_embeddings().weight.shape[0])
        if mask_id is None and tokenizer is not None:
            mask_id = tokenizer.mask_token_id
        if mask_id is None:
            mask_id = getattr(cfg, "mask_token_id", None)
        require(mask_id is not None,
                "model: it has no mask token (the tokenizer has no mask_token and the config "
                "no mask_token_id)" if tokenizer is not None else
                "model: it has no tokenizer (tokenizer.json, vocab.txt, ...) and its config "
                "no mask_token_id")
        require(0 <= int(mask_id) < self.vocab_size,
                f"mask_id: {mask_id} is outside the vocabulary [0, {self.vocab_size})")
        self.mask_id = int(mask_id)
        self.eos_ids = self._eos_ids(cfg, tokenizer)
        special = set(self._special_ids(cfg, tokenizer)) | {self.mask_id}
        size = min(len(tokenizer), self.vocab_size) if tokenizer is not None else self.vocab_size
        real = [i for i in range(size) if i not in special or i in self.eos_ids]
        real = [i for i in real if i != self.mask_id]
        require(len(real) >= 2, "model: fewer than 2 real tokens in its vocabulary")
        self.real_token_ids = tuple(real)
        mask = torch.zeros(self.vocab_size, dtype=torch.bool)
        mask[real] = True
        self.register_buffer("_real_mask", mask, persistent=False)
        pad = tokenizer.pad_token_id if tokenizer is not None else getattr(cfg, "pad_token_id",
                                                                            None)
        if pad is None or pad in self.eos_ids or pad == self.mask_id or mask[pad]:
            pad = next((i for i in sorted(special) if i != self.mask_id and not mask[i]
                        and i not in self.eos_ids), None)
        self.pad_id = pad
        self.max_length = int(max_length or self._max_length(cfg, tokenizer))
        self.hidden_size = int(getattr(cfg, "hidden_size", 0) or getattr(cfg, "d_model", 0))
        self.hidden_layer = hidden_layer
        #: generation length the folder's generation_config.json names (None: not given)
        self.default_gen_length: int | None = None
        self.shift_logits = (getattr(cfg, "model_type", "") in SHIFTED_LOGITS
                             if shift_logits is None else shift_logits)
        self.block_causal = 1 if getattr(cfg, "causal", None) is True else None
        fwd = hf_model.forward
        self._takes = {k: _accepts(fwd, k) for k in ("attention_mask", "position_ids",
                                                     "output_hidden_states")}

    @staticmethod
    def _special_ids(cfg, tokenizer) -> list[int]:
        ids = []
        if tokenizer is not None:
            ids += list(tokenizer.all_special_ids)
            ids += [i for i, t in getattr(tokenizer, "added_tokens_decoder", {}).items()
                    if getattr(t, "special", False)]
        for name in ("pad_token_id", "bos_token_id", "eos_token_id", "sep_token_id",
                     "cls_token_id", "unk_token_id"):
            v = getattr(cfg, name, None)
            ids += v if isinstance(v, list) else [] if v is None else [v]
        return [int(i) for i in ids if i is not None]

    @staticmethod
    def _eos_ids(cfg, tokenizer) -> tuple[int, ...]:
        ids = []
        if tokenizer is not None and tokenizer.eos_token_id is not None:
            ids.append(tokenizer.eos_token_id)
        v = getattr(cfg, "eos_token_id", None)
        ids += v if isinstance(v, list) else [] if v is None else [v]
        return tuple(sorted({int(i) for i in ids}))

    @staticmethod
    def _max_length(cfg, tokenizer) -> int:
        """The smallest length limit the folder states: the tokenizer's ``model_max_length``
        (when finite) and the config's position limits."""
        limits = [getattr(cfg, name, None) for name in (
            "max_position_embeddings", "max_sequence_length", "n_positions", "seq_length")]
        if tokenizer is not None:
            limits.append(getattr(tokenizer, "model_max_length", None))
        if getattr(cfg, "model_type", "") in _OFFSET_POSITIONS:  # ids start past padding_idx
            limits[0] = limits[0] - (getattr(cfg, "pad_token_id", 1) or 0) - 1 \
                if is_int(limits[0]) else None
        limits = [v for v in limits
                  if is_int(v) and 0 < v < 1_000_000]
        return min(limits, default=1 << 20)

    @property
    def real_token_mask(self) -> torch.Tensor:
        return self._real_mask.cpu()

    def check_tokens(self, tokens: torch.Tensor) -> None:
        """Shape, dtype, length and vocabulary range; given context may hold any id."""
        if not isinstance(tokens, torch.Tensor):
            raise UnmaskError(f"tokens: expected a torch.Tensor, got {type(tokens).__name__}")
        require(tokens.dim() == 2, f"tokens: expected shape (B, N), got {tuple(tokens.shape)}")
        require(tokens.dtype == torch.long, f"tokens: expected dtype torch.long, got "
                                            f"{tokens.dtype}")
        require(tokens.shape[1] <= self.max_length,
                f"tokens: length {tokens.shape[1]} exceeds the model's max_length "
                f"{self.max_length}")
        if tokens.numel():
            lo, hi = int(tokens.min()), int(tokens.max())
            require(lo >= 0 and hi < self.vocab_size,
                    f"tokens: id {lo if lo < 0 else hi} is outside the vocabulary "
                    f"[0, {self.vocab_size})")

    @property
    def supports_attentions(self) -> bool:
        """A model of the ``transformers`` library itself (no folder code): its attention
        weights come from the eager attention, switched to for the calls that ask."""
        return (hasattr(self.hf, "set_attn_implementation")
                and not getattr(self.hf.config, "auto_map", None))

    def _attentions(self, tokens: torch.Tensor, kwargs: dict):
        """The model's output with ``attentions`` (eager attention for this call only)."""
        before = getattr(self.hf.config, "_attn_implementation", None)
        if before != "eager":
            self.hf.set_attn_implementation("eager")
        try:
            out = self.hf(input_ids=tokens, output_attentions=True, **kwargs)
        finally:
            if before not in (None, "eager"):
                self.hf.set_attn_implementation(before)
        if not getattr(out, "attentions", None):
            raise UnmaskError(f"model: {getattr(self, 'source', None) or 'it'} returns no "
                              "attention weights")
        return out

    @property
    def supports_logits_positions(self) -> bool:
        """Always: where the output layer is a ``torch.nn.Linear`` the model calls as a
        module (its ``get_output_embeddings()``), it runs on the positions asked for only;
        otherwise the logits of every position are computed and cut."""
        return True

    def _output_head(self):
        """The model's output layer (looked up once per ``hf`` module)."""
        kept = self.__dict__.get("_head")
        if kept is None or kept[0] is not self.hf:
            kept = (self.hf, self.hf.get_output_embeddings())
            self.__dict__["_head"] = kept
        return kept[1]

    @contextlib.contextmanager
    def output_layer_on(self, lo: int, hi: int, n: int):
        """While open, the output layer (a ``Linear`` module) sees the positions ``lo:hi``
        of its (B, n, D) inputs only (other output layers see every position)."""
        head = self._output_head() if (lo, hi) != (0, n) else None
        if not isinstance(head, torch.nn.Linear):
            yield
            return

        def cut(module, args):
            x = args[0]
            return (x[:, lo:hi], *args[1:]) if x.dim() == 3 and x.shape[1] == n else None

        hook = head.register_forward_pre_hook(cut)
        try:
            yield
        finally:
            hook.remove()

    @property
    def supports_padded(self) -> bool:
        return self.pad_id is not None

    def forward(self, tokens: torch.Tensor, output_hidden_layers: bool = False,
                output_attentions: bool = False, logits_positions: slice | None = None,
                padded: bool | None = None) -> ModelOutput:
        """The pass on ``tokens`` (B, N); ``logits_positions`` lo:hi: logits and hidden
        states of those positions only (:attr:`supports_logits_positions`); ``padded``:
        whether some row holds ``pad_id`` (:attr:`supports_padded`; None: read here)."""
        kwargs = {}
        if padded is None:
            padded = self.pad_id is not None and bool((tokens == self.pad_id).any())
        if padded and self._takes["attention_mask"]:
            kwargs.update(padding_inputs(self.hf, tokens != self.pad_id,
                                         self._takes["position_ids"]))
        if self._takes["output_hidden_states"]:
            kwargs["output_hidden_states"] = True
        b, n = tokens.shape
        lo, hi, _ = (logits_positions or slice(0, n)).indices(n)
        # the output layer's positions: Dream's logit at i is the layer's at i - 1
        moved = self.shift_logits and lo > 0
        head_lo, head_hi = (lo - 1, hi - 1) if moved else (lo, hi)
        with self.output_layer_on(head_lo, head_hi, n):
            out = (self._attentions(tokens, kwargs) if output_attentions
                   else self.hf(input_ids=tokens, **kwargs))
        logits = out.logits if hasattr(out, "logits") else out[0]
        if logits.shape[1] == n:  # the output layer ran on every position
            logits = logits[:, head_lo:head_hi]
        if self.shift_logits and not moved:
            logits = torch.cat([logits[:, :1], logits[:, :-1]], dim=1)
        states = getattr(out, "hidden_states", None)
        if states:
            hidden = states[self.hidden_layer][:, lo:hi].float()
        else:  # the model does not expose hidden states
            hidden = logits.new_zeros(b, hi - lo, 0, dtype=torch.float32)
        layers = tuple(h.float() for h in states) if output_hidden_layers and states else None
        attentions = tuple(a.float() for a in out.attentions) if output_attentions else None
        return ModelOutput(logits=logits.float(), hidden=hidden, hidden_layers=layers,
                           attentions=attentions)

    @classmethod
    def from_pretrained(cls, directory: str | os.PathLike, *, dtype: str | torch.dtype | None
                        = None, device: str | torch.device = "cpu",
                        trust_remote_code: bool = False, hidden_layer: int = -1,
                        mask_id: int | None = None, meta: dict | None = None
                        ) -> HFMaskedModel:
        """Load a local ``transformers`` folder (config.json, weights, tokenizer; ``meta``: the
        config.json, when the caller has read it).

        Masked LMs load through ``AutoModelForMaskedLM``; a folder with its own code
        (``auto_map``) through the class it maps (``AutoModelForMaskedLM``, ``AutoModel``
        or ``AutoModelForCausalLM``), only with ``trust_remote_code``.
        """
        directory = Path(directory)
        device = check_device(device)
        meta = read_json_object(directory / "config.json") if meta is None else meta
        runs_code = check_remote_code(directory, meta, trust_remote_code)
        require(any((directory / f).is_file() for f in _WEIGHT_FILES),
                f"model: {directory} has no weights (model.safetensors)")
        if isinstance(dtype, str):
            require(dtype in DTYPES, f"dtype: expected one of {', '.join(DTYPES)}, got "
                                     f"{dtype!r}")
            dtype = DTYPES[dtype]
        tr = import_transformers()
        prepare_transformers(tr)
        options = dict(local_files_only=True, trust_remote_code=runs_code)
        try:
            config = tr.AutoConfig.from_pretrained(str(directory), **options)
        except Exception as e:  # noqa: BLE001 - any failure to parse a user's file is one line
            raise UnmaskError(f"model: {directory} config.json is not a transformers config "
                              f"({_first_line(e)})") from None
        restore_config_keys(config, meta)
        loader, load = _model_loader(tr, directory, meta.get("auto_map") or {})
        try:
            hf_model, info = load(str(directory), config=config, dtype=dtype or torch.float32,
                                  output_loading_info=True, **options)
        except (pickle.UnpicklingError, OSError, ValueError, KeyError, RuntimeError, TypeError,
                SafetensorError) as e:
            raise UnmaskError(load_failure(directory, config, loader, e)) from None
        missing = sorted(info.get("missing_keys") or [])
        if missing:
            raise UnmaskError(f"model: {directory} weights lack {missing[0]!r} that its config "
                              "implies (it would be left at random initialisation)")
        check_unexpected_weights(directory, hf_model, info)
        tokenizer = None
        if any((directory / f).is_file() for f in _TOKENIZER_FILES):
            try:
                tokenizer = tr.AutoTokenizer.from_pretrained(str(directory), **options)
            except (OSError, ValueError, KeyError, TypeError):
                tokenizer = None
        model = cls(hf_model.to(device), tokenizer, mask_id=mask_id, hidden_layer=hidden_layer)
        model.source = str(directory)
        model.default_gen_length = _max_new_tokens(directory)
        return model


def _index_pattern(name: str) -> str:
    """``name`` with its module indices as ``#`` ('encoder.layer.7.x' -> 'encoder.layer.#.x')."""
    return re.sub(r"(?<=\.)\d+(?=\.|$)", "#", name)


def check_unexpected_weights(directory: Path, model: torch.nn.Module, info: dict) -> None:
    """Refuse weights that hold more of the model than its config declares: an unexpected
    key (``info``: transformers' loading info) that is one more copy of a module the model
    has (a layer past ``num_hidden_layers``) means a config that would silently truncate the
    model. Other unexpected keys (the heads of another task, a pooler) are left out by
    design."""
    own = set()
    for key in model.state_dict():
        pattern = _index_pattern(key)
        own.update((pattern, pattern.split(".", 1)[-1]))
    for key in sorted(info.get("unexpected_keys") or []):
        pattern = _index_pattern(key)
        if pattern in own or pattern.split(".", 1)[-1] in own:
            raise UnmaskError(f"model: {directory} weights hold {key!r}, which its config "
                              "does not imply (the weights hold more than config.json "
                              "declares: num_hidden_layers, ...)")


def load_failure(directory: Path, config, loader, error: BaseException) -> str:
    """One line for a folder transformers could not load; a tensor whose stored shape differs
    from the one its config.json implies is named with both shapes."""
    # transformers 4.x wraps the unpickling error in a ValueError, then an OSError
    chain, link = [], error
    while link is not None and len(chain) < 8:
        chain.append(link)
        link = link.__cause__ or link.__context__
    if any(isinstance(e, pickle.UnpicklingError) for e in chain):
        return (f"model: {directory} pytorch_model.bin holds objects other than tensors; "
                "pickled weights are read only with weights_only=True: save them as "
                "model.safetensors")
    # 5.x says "mismatched"; 4.x "Error(s) in loading state_dict ... size mismatch"
    if any(word in str(error) for word in ("mismatch", "loading state_dict")):
        mismatch = _shape_mismatch(directory, config, loader)
        if mismatch:
            name, stored, wanted = mismatch
            return (f"model: {directory} weights {name!r} have shape {stored}, but its "
                    f"config.json implies {wanted} (vocab_size, hidden_size, ... differ from "
                    "the weights)")
        return (f"model: {directory} weights do not have the shapes its config.json implies "
                "(vocab_size, hidden_size, ... differ from the weights)")
    return f"model: {directory} is not a readable masked LM ({_first_line(error)})"


def _shape_mismatch(directory: Path, config, loader) -> tuple[str, tuple, tuple] | None:
    """(name, stored shape, shape the config implies) of the first tensor of
    model.safetensors that differs, matching names up to the model's base prefix; None when
    none is found (other weight files, say)."""
    from safetensors import safe_open

    path = directory / "model.safetensors"
    if not path.is_file():
        return None
    try:
        with torch.device("meta"):
            wanted = {k: tuple(v.shape) for k, v in loader.from_config(config).state_dict()
                      .items()}
        with safe_open(str(path), "pt") as f:
            stored = {k: tuple(f.get_slice(k).get_shape()) for k in f.keys()}
    except Exception:  # noqa: BLE001 - only a better message is at stake
        return None
    for name, shape in stored.items():
        for key in (name, name.split(".", 1)[-1]):
            if key in wanted and wanted[key] != shape:
                return name, shape, wanted[key]
    return None


def _model_loader(tr, directory: Path, auto_map: dict):
    """(class, its ``from_pretrained``) for the folder's model: the class its ``auto_map``
    names (from its own code, adapted to the installed transformers,
    :mod:`unmask.models.hf_compat`), else ``AutoModelForMaskedLM``."""
    key = next((k for k in ("AutoModelForMaskedLM", "AutoModel", "AutoModelForCausalLM")
                if k in auto_map), None)
    if key is None:
        return tr.AutoModelForMaskedLM, tr.AutoModelForMaskedLM.from_pretrained
    ref = auto_map[key][0] if isinstance(auto_map[key], list) else auto_map[key]
    model_class = load_code_class(tr, directory, ref)
    return model_class, code_model_loader(tr, model_class)


def _max_new_tokens(directory: Path) -> int | None:
    """``max_new_tokens`` of the folder's generation_config.json (the generation length its
    model is meant for), or None."""
    path = directory / "generation_config.json"
    if not path.is_file():
        return None
    value = read_json_object(path).get("max_new_tokens")
    return value if is_int(value) and value >= 1 \
        else None
