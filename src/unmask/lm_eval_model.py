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

import torch
from lm_eval.api.model import LM
from lm_eval.api.registry import register_model

from unmask.errors import UnmaskError
from unmask.generate import generate, parse_sampler
from unmask.models.auto import load_model

LIKELIHOOD_MESSAGE = ("unmask: likelihood requests are not implemented (a masked diffusion "
                      "model gives an ELBO, not a likelihood); use generate_until tasks")


def _bool(v) -> bool:
    return v if isinstance(v, bool) else str(v).lower() in ("1", "true", "yes")


@register_model("unmask")
class UnmaskLM(LM):
    """lm-eval model: ``pretrained`` (a model folder) decoded by ``sampler``.

    Args:
        pretrained: a transformers model folder (see :func:`unmask.models.auto.load_model`).
        sampler: a spec ``NAME[:K=V;K=V]`` (LLaDA names accepted).
        gen_length: tokens generated per request (the same for every request; a task's
            ``max_gen_toks`` is not read, its ``until`` strings cut the text).
        block_length, steps, temperature, seed, chat_template, min_new_tokens: as for
            :func:`unmask.generate`.
        batch_size: requests per batch.
        trust_remote_code, dtype, device: as for loading.
    """

    def __init__(self, pretrained: str, sampler: str = "confidence", gen_length: int = 128,
                 block_length: int | None = None, steps: int | None = None,
                 temperature: float = 0.0, seed: int = 0, chat_template: bool = False,
                 batch_size: int | str = 1, trust_remote_code: bool = False,
                 dtype: str | None = None, device: str | None = None,
                 min_new_tokens: int = 0, **_ignored):
        super().__init__()
        options = {"trust_remote_code": _bool(trust_remote_code)}
        if dtype:
            options["dtype"] = dtype
        if device and not (str(device).startswith("cuda") and not torch.cuda.is_available()):
            options["device"] = device  # lm-eval passes cuda by default; here it may be absent
        self.model = load_model(str(pretrained), task="text", **options)
        self.sampler = parse_sampler(str(sampler).replace(";", ","))
        self.gen_length = int(gen_length)
        self.block_length = None if block_length in (None, "") else int(block_length)
        self.steps = None if steps in (None, "") else int(steps)
        self.temperature = float(temperature)
        self.seed = int(seed)
        self.chat_template = _bool(chat_template)
        self.min_new_tokens = int(min_new_tokens)
        self.batch_size = 1 if str(batch_size).startswith("auto") else int(batch_size)
        self.nfe: list[int] = []

    def generate_until(self, requests, disable_tqdm: bool = False) -> list[str]:
        out: list[str] = []
        for lo in range(0, len(requests), self.batch_size):
            chunk = requests[lo:lo + self.batch_size]
            contexts = [r.args[0] for r in chunk]
            results = generate(self.model, None, contexts, sampler=self.sampler,
                               gen_length=self.gen_length, block_length=self.block_length,
                               steps=self.steps, temperature=self.temperature,
                               seed=self.seed + lo, chat_template=self.chat_template,
                               min_new_tokens=self.min_new_tokens)
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
        raise SystemExit(f"error: {e}") from None


if __name__ == "__main__":
    main()
