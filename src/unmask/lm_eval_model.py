"""An ``unmask`` model type for lm-evaluation-harness (``lm_eval``): ``generate_until`` with
any sampler on a Hugging Face masked/diffusion LM folder.

Importing this module registers the type. From the shell, run lm-eval through it:

    python -m unmask.lm_eval_model --model unmask \\
        --model_args pretrained=DIR,sampler=eb:gamma=0.1,gen_length=64,block_length=32 \\
        --tasks TASK

lm-eval splits ``--model_args`` on commas, so a sampler with several parameters separates
them with ``;`` (``sampler=eb:gamma=0.1;order=confidence``). Likelihood requests
(``loglikelihood``, ``loglikelihood_rolling``) are not implemented: a masked diffusion model
gives a bound on the likelihood, not the likelihood.
"""

from __future__ import annotations

import sys

import torch
from lm_eval.api.model import LM
from lm_eval.api.registry import register_model
from lm_eval.utils import simple_parse_args_string

from unmask.errors import UnmaskError, require
from unmask.generate import generate, text_request
from unmask.models.auto import load_model
from unmask.request import DecodeRequest
from unmask.validation import (
    bool_text,
    finite_float,
    non_negative_int,
    one_of,
    optional,
    parse_text_args,
    positive_int,
    seed_int,
)

LIKELIHOOD_MESSAGE = ("unmask: likelihood requests are not implemented (a masked diffusion "
                      "model gives an ELBO, not a likelihood); use generate_until tasks")


def _batch_size(text: str) -> int:
    """``auto`` (lm-eval's ``auto`` / ``auto:N``) is one request per batch."""
    return 1 if text.strip().startswith("auto") else positive_int(text)


#: every model argument -> the parser of its text (the CLI's own argument types)
MODEL_ARGS = {
    "pretrained": str, "sampler": str, "gen_length": positive_int,
    "block_length": optional(positive_int), "steps": optional(positive_int),
    "temperature": finite_float(0.0), "seed": seed_int, "chat_template": bool_text,
    "batch_size": _batch_size, "max_batch_size": optional(positive_int),
    "trust_remote_code": bool_text, "dtype": optional(str), "device": optional(str),
    "min_new_tokens": non_negative_int, "cache_kv": optional(one_of("prefix", "dual")),
    "regex": str, "choice": str, "json_schema": str,
}
#: the model arguments that constrain the output (:mod:`unmask.constraints`), at most one
CONSTRAINT_ARGS = ("regex", "choice", "json_schema")


def parse_model_args(args: dict) -> dict:
    """``args`` (lm-eval's parsed ``--model_args`` and its ``--batch_size``/``--device``)
    checked and typed by :data:`MODEL_ARGS`; :class:`UnmaskError` names the key and what is
    wrong with its value, or an unknown key."""
    typed = parse_text_args(args, MODEL_ARGS, "model_args")
    require("pretrained" in args, "model_args: pretrained=DIR (a model folder) is required")
    return typed


#: the model arguments that are decoding settings (:class:`~unmask.request.DecodeRequest`)
REQUEST_ARGS = ("sampler", "gen_length", "block_length", "steps", "temperature", "seed",
                "chat_template", "min_new_tokens", "cache_kv")


def request_from_model_args(args: dict) -> DecodeRequest:
    """The one request of parsed ``--model_args`` (:func:`parse_model_args`): its decoding
    settings, ``;`` in the sampler read as ``,``; gen_length 128 unless given."""
    settings = {k: args[k] for k in REQUEST_ARGS if k in args}
    settings["sampler"] = settings.get("sampler", "confidence").replace(";", ",")
    settings.setdefault("gen_length", 128)
    return text_request(None, {**settings, "constraint": _constraint(args)})


def _constraint(args: dict):
    """The ConstraintSpec of ``regex=R``, ``choice=A;B`` or ``json_schema=FILE`` (None)."""
    from unmask import constraints

    given = [k for k in CONSTRAINT_ARGS if k in args]
    require(len(given) <= 1, f"model_args: give one of {', '.join(given)}, not several")
    if not given:
        return None
    value = args[given[0]]
    if given[0] == "regex":
        return constraints.regex(value)
    if given[0] == "choice":
        return constraints.choice(*value.split(";"))
    try:
        with open(value, encoding="utf-8") as f:
            return constraints.json_schema(f.read())
    except (OSError, UnicodeDecodeError) as exc:
        raise UnmaskError(f"json_schema: cannot read {value!r}: "
                          f"{getattr(exc, 'strerror', None) or exc}") from None


@register_model("unmask")
class UnmaskLM(LM):
    """lm-eval model: ``pretrained`` (a model folder) decoded by ``sampler``.

    Args (every one given as text in ``--model_args``, checked by :func:`parse_model_args`;
    an unknown key is refused):
        pretrained: a transformers model folder (see :func:`unmask.models.auto.load_model`).
        sampler: a spec ``NAME[:K=V;K=V]`` (LLaDA names accepted).
        gen_length: tokens generated per request (the same for every request; a task's
            ``max_gen_toks`` is not read, its ``until`` strings cut the text).
        block_length, steps, temperature, seed, chat_template, min_new_tokens, cache_kv: as
            for :func:`unmask.generate` (``cache_kv=prefix|dual``: Fast-dLLM's KV cache).
        regex, choice, json_schema: at most one; the generated text must match ``regex``, be
            one of ``choice`` (options separated by ``;``) or be JSON valid against the schema
            in the file ``json_schema`` (docs/constraints.md).
        batch_size: requests per batch, from ``--model_args`` or lm-eval's ``--batch_size``
            (``--model_args`` wins when both are given; ``auto`` is 1). ``max_batch_size`` is
            accepted and not used.
        trust_remote_code, dtype, device: as for loading.
    """

    def __init__(self, pretrained: str, **model_args):
        super().__init__()
        a = parse_model_args({"pretrained": pretrained, **model_args})
        options = {"trust_remote_code": a.get("trust_remote_code", False)}
        if a.get("dtype"):
            options["dtype"] = a["dtype"]
        device = a.get("device")
        if device and not (device.startswith("cuda") and not torch.cuda.is_available()):
            options["device"] = device  # lm-eval passes cuda by default; here it may be absent
        self.model = load_model(a["pretrained"], task="text", **options)
        self.request = request_from_model_args(a)
        self.batch_size = a.get("batch_size", 1)
        self.nfe: list[int] = []

    @classmethod
    def create_from_arg_string(cls, arg_string: str, additional_config: dict | None = None):
        """``--model_args`` text plus lm-eval's own settings (``batch_size``, ``device``, ...);
        a key given in both is read from ``--model_args``; a key given twice in
        ``--model_args`` is refused."""
        keys = [item.split("=", 1)[0].strip() for item in arg_string.split(",") if item.strip()]
        twice = sorted({k for k in keys if keys.count(k) > 1})
        require(not twice, f"model_args: {twice[0] if twice else ''} given twice")
        return cls.create_from_arg_obj(simple_parse_args_string(arg_string), additional_config)

    @classmethod
    def create_from_arg_obj(cls, arg_dict: dict, additional_config: dict | None = None):
        """``arg_dict`` (``--model_args`` as lm-eval parsed it, or a caller's dict) plus
        lm-eval's own settings: a key given in both is read from ``arg_dict`` (lm-eval's
        default would pass it twice); ``pretrained`` is required."""
        require(isinstance(arg_dict, dict), "model_args: expected key=value pairs")
        args = dict(arg_dict)
        for key, value in (additional_config or {}).items():
            require(key != "device" or value is None or key not in args
                    or str(args[key]) == str(value),
                    f"model_args: device={args.get(key)} conflicts with --device {value}; "
                    "give one")
            if value is not None and key not in args:
                args[key] = value
        require("pretrained" in args, "model_args: pretrained=DIR (a model folder) is "
                                      "required")
        return cls(**args)

    def generate_until(self, requests, disable_tqdm: bool = False) -> list[str]:
        out: list[str] = []
        for lo in range(0, len(requests), self.batch_size):
            chunk = requests[lo:lo + self.batch_size]
            contexts = [r.args[0] for r in chunk]
            request = self.request.replace(seed=self.request.seed + lo)
            results = generate(self.model, None, contexts, request)
            for req, res in zip(chunk, results, strict=True):
                kwargs = req.args[1] if len(req.args) > 1 else {}
                until = kwargs.get("until") or []
                until = [until] if isinstance(until, str) else list(until)
                text = res.text
                for stop in until:
                    if stop and stop in text:
                        text = text[:text.index(stop)]
                self.nfe.append(res.nfe)
                out.append(text)
        return out

    def loglikelihood(self, requests, disable_tqdm: bool = False):
        raise NotImplementedError(LIKELIHOOD_MESSAGE)

    def loglikelihood_rolling(self, requests, disable_tqdm: bool = False):
        raise NotImplementedError(LIKELIHOOD_MESSAGE)


def main() -> None:
    """lm-eval's command line with the ``unmask`` model type registered."""
    from lm_eval.__main__ import cli_evaluate

    try:
        cli_evaluate()
    except UnmaskError as e:
        print(f"error: {e}", file=sys.stderr)
        raise SystemExit(2) from None


if __name__ == "__main__":
    main()
