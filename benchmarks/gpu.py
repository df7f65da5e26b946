"""The prepared GPU run: unmask beside the references on one GPU, nothing downloaded, in one
call (about 6-8 minutes on one H200), printing its tables and writing one JSON.

    PYTHONPATH=src:tests/hf python benchmarks/gpu.py [--out gpu.json] [--device cuda]
        [--sections loop sudoku llada dream] [--budget-s 460] [--sharpen 4]
    PYTHONPATH=src:tests/hf python benchmarks/gpu.py --dry-run   # tiny shapes on the CPU

Sections (each timed with the device synchronised; a section that fails is recorded in the
JSON with its error and the run goes on; one that would start past ``--budget-s`` is
skipped):

- ``loop``: the zero-cost model (benchmarks/loop_overhead.py) on the device: each sampler's
  loop + selection ms per pass at batch 1, 64, 1000 against confidence's, and host reads per
  pass (each a synchronisation here).
- ``sudoku``: the shipped Sudoku model on the 1,000 hard puzzles at batch 1000: solved %,
  passes, wall, ms per pass and host reads per pass for sequential, ``lossless``,
  ``topk:k=7``, MI-guided and verified rows; and the shipped text model's tokens/s at batch
  1 and 64.
- ``llada``: a random LLaDA-8B-shaped model (LLaDA's own modelling code, bf16, built in place
  on the device): (1) one batch-1 pass against the weight-read bound (parameter bytes over
  the measured copy bandwidth), eager and under ``torch.compile``; (2) unmask ``generate``
  against Fast-dLLM's ``generate`` / ``generate_with_prefix_cache`` /
  ``generate_with_dual_cache`` (threshold 0.9 and low-confidence 32 steps; gen 128, block
  32, prompt 32; batch 1 and 8; the references take one row, so batch 8 runs them 8 times):
  tokens/s, ratio, rows with the reference's tokens; (3) ``--compile`` against eager at
  batch 1 with the dual cache; (3b) the prompt layout: a 20-token prompt and one block of
  128 as prompt-then-masks against slots padded to the block, beside Fast-dLLM's tokens;
  (4) batch 8 against each row alone, default and
  ``batch_invariant``, and the bf16 GEMM of 8 rows' positions against one row's; (4b) the
  loop's Gumbel noise for temperature > 0 over a block's (32, V) a row, against an eager
  pass, at batch 1 and 8;
  (5) diffusers' ``LLaDA2Pipeline`` (threshold 0.9) beside unmask, when diffusers imports.
- ``dream``: a random Dream-7B-shaped model (Dream's code): unmask (confidence, one block)
  against Dream's own ``diffusion_generate`` (maskgit_plus, one step a generated token) at
  batch 1 and 8, timed; tokens compared at 2 steps with float32 logits, where Dream's
  choices are unmask's (``section_dream``).

Needs Fast-dLLM's code folder (``$UNMASK_FASTDLLM``, ../shared/external/fast-dllm or
shared/external/fast-dllm in the repository, see tests/hf/dllm_models.py) and einops (LLaDA's
code imports it; pure Python), and diffusers for (5); not pytest. The models are random, so
tokens measure agreement, not quality. On a machine that reaches no package index, carry
them in (docs/gpu.md). A part turned off (``--no-compile``) or missing its package is listed
on the last line with its reason; one skipped for time, by its name alone. The JSON is
rewritten after every part, ``"complete": false`` until the run ends, so a run killed for
time still leaves what it finished. The last table (and the JSON's ``targets``) judges each
GPU target: met, missed, or not measured (:func:`targets`).
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import platform
import random
import tempfile
import time
import traceback
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]

#: the run's shapes: real (on a GPU) and the dry run's (CPU, seconds)
SHAPES = {
    "real": {"llada": "LLADA_8B", "dream": "DREAM_7B", "gen": 128, "block": 32, "prompt": 32,
             "steps": 32, "batch": 8, "puzzles": 1000, "loop_batches": [1, 64, 1000]},
    "dry": {"llada": {"vocab_size": 96, "mask_id": 93, "d_model": 32, "n_layers": 2,
                      "n_heads": 4},
            "dream": {"vocab_size": 96, "mask_id": 93, "hidden": 32, "layers": 2, "heads": 4,
                      "kv_heads": 2},
            "gen": 16, "block": 8, "prompt": 8, "steps": 4, "batch": 3, "puzzles": 4,
            "loop_batches": [1, 4]},
}
SUDOKU_SPECS = ["confidence", "lossless", "topk:k=7", "mi-guided:gamma=0.3",
                "mi-guided:gamma=1.0,order=confidence+verify=0.002", "eb+verify"]
LOOP_SAMPLERS = ["confidence", "eb", "topk", "threshold", "klass", "dus", "factor", "pc",
                 "mi-guided", "eb+verify", "info-gain"]
RULES = {"threshold": ("threshold:tau=0.9", {"threshold": 0.9}),
         "low-confidence": ("confidence", {})}
REFERENCES = {None: "generate", "prefix": "generate_with_prefix_cache",
              "dual": "generate_with_dual_cache"}


class Run:
    """The run's settings, clock and results."""

    def __init__(self, args):
        self.args, self.device = args, torch.device(args.device)
        self.shape = SHAPES["dry" if args.dry_run else "real"]
        self.t0 = time.perf_counter()
        self.results: dict = {"meta": _meta(args), "complete": False, "sections": {},
                              "skipped": [], "errors": {}}

    def save(self) -> None:
        """Write the results so far to ``--out``, whole or not at all (a temporary file
        renamed over it): a run killed for time keeps every part finished before."""
        self.results["wall_s"] = time.perf_counter() - self.t0
        out = Path(self.args.out)
        tmp = out.with_name(out.name + ".tmp")
        tmp.write_text(json.dumps(self.results, indent=1))
        os.replace(tmp, out)

    def left(self) -> float:
        return self.args.budget_s - (time.perf_counter() - self.t0)

    def sync(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def timed(self, fn):
        """(seconds, fn()) with the device synchronised on both ends."""
        self.sync()
        t0 = time.perf_counter()
        out = fn()
        self.sync()
        return time.perf_counter() - t0, out


class ModelSpans:
    """While open, the calls of ``module``'s forward and the seconds spent inside them
    (outermost calls only): on a GPU from CUDA events queued on the stream as each call
    starts and returns (the device's time from the call's start to its last kernel; nothing
    is synchronised), elsewhere from the host's clock. Read :attr:`seconds` once the
    device has finished (after :meth:`Run.timed`).

        with ModelSpans(model.hf, device) as spans:
            wall, out = run.timed(fn)
        outside = (wall - spans.seconds) / spans.calls  # the loop's time a model call
    """

    def __init__(self, module: torch.nn.Module, device: torch.device):
        self.module, self.cuda = module, torch.device(device).type == "cuda"
        self.calls, self._depth, self._start_mark, self._spans = 0, 0, None, []

    def __enter__(self) -> ModelSpans:
        self._hooks = [self.module.register_forward_pre_hook(self._start),
                       self.module.register_forward_hook(self._stop, always_call=True)]
        return self

    def __exit__(self, *exc) -> None:
        for hook in self._hooks:
            hook.remove()

    def _now(self):
        if not self.cuda:
            return time.perf_counter()
        event = torch.cuda.Event(enable_timing=True)
        event.record()
        return event

    def _start(self, module, args) -> None:
        self._depth += 1
        if self._depth == 1:
            self.calls += 1
            self._start_mark = self._now()

    def _stop(self, module, args, output) -> None:
        self._depth -= 1
        if self._depth == 0:
            self._spans.append((self._start_mark, self._now()))

    @property
    def seconds(self) -> float:
        """Seconds inside the calls (on a GPU: the events must have completed)."""
        if self.cuda:
            return sum(start.elapsed_time(end) for start, end in self._spans) / 1e3
        return sum(end - start for start, end in self._spans)


def _meta(args) -> dict:
    meta = {"torch": torch.__version__, "python": platform.python_version(),
            "device": args.device, "dry_run": args.dry_run}
    if torch.cuda.is_available() and args.device.startswith("cuda"):
        meta["gpu"] = torch.cuda.get_device_name(args.device)
    for name in ("transformers", "diffusers"):
        with contextlib.suppress(ImportError):
            meta[name] = __import__(name).__version__
    return meta


def _table(title: str, head: list[str], rows: list[list]) -> None:
    print(f"\n## {title}\n\n| " + " | ".join(head) + " |\n" + "|---" * len(head) + "|")
    for r in rows:
        print("| " + " | ".join(f"{v:.3g}" if isinstance(v, float) else str(v) for v in r)
              + " |", flush=True)


# ------------------------------------------------------------------ loop and Sudoku


def section_loop(run: Run) -> dict:
    import loop_overhead as lo

    from unmask.models.toy import FixedOutputModel

    model = FixedOutputModel().to(run.device)
    cases = lo.cases()
    out = {}
    for label in LOOP_SAMPLERS:
        build = cases[label]
        reads = lo.host_reads_per_pass(model, build, batch=min(64, max(
            run.shape["loop_batches"])))[0]
        out[label] = {"host_reads_per_pass": reads, **{
            f"b{b}": lo.time_per_pass(model, build, b, repeats=2)
            for b in run.shape["loop_batches"]}}
    rows = []
    for label, r in out.items():
        cells = [f"{r[f'b{b}']['ms_per_pass']:.3f} "
                 f"({r[f'b{b}']['ms_per_pass'] / out['confidence'][f'b{b}']['ms_per_pass']:.2f}x)"
                 for b in run.shape["loop_batches"]]
        rows.append([label, *cells, r["host_reads_per_pass"]])
    _table("loop + selection per pass, zero-cost model",
           ["sampler", *(f"b={b} ms (vs conf)" for b in run.shape["loop_batches"]),
            "host reads/pass"], rows)
    return out


def section_sudoku(run: Run) -> dict:
    from unmask import decode
    from unmask.host_reads import count_host_reads
    from unmask.models.auto import load_model
    from unmask.presets import PRESETS
    from unmask.samplers.spec import parse_spec
    from unmask.sudoku.datasets import load_set
    from unmask.sudoku.tokens import grid_to_tokens

    model = load_model("sudoku", device=run.device)
    puzzles, solutions = load_set("hard")
    n = run.shape["puzzles"]
    x, answer = grid_to_tokens(puzzles[:n]), grid_to_tokens(solutions[:n])
    decode(model, x[:2].to(run.device), "confidence")  # warm-up
    out, rows = {}, []
    for spec in SUDOKU_SPECS:
        sampler_spec = PRESETS[spec].spec if spec in PRESETS else spec
        decode(model, answer.to(run.device), parse_spec(sampler_spec).build())  # loads
        with count_host_reads() as once:  # the set-up every decode makes
            decode(model, answer.to(run.device), parse_spec(sampler_spec).build())
        with count_host_reads() as counted:
            wall, res = run.timed(lambda s=sampler_spec: decode(
                model, x.to(run.device), parse_spec(s).build(), seed=0))
        passes = int(res.steps.max())
        # less the set-up and the first pass's logits check, made once a decode
        reads = counted.total - once.total - 1
        solved = float((res.tokens.cpu() == answer).all(1).double().mean())
        out[spec] = {"solved": solved, "passes": passes, "mean_nfe": float(res.nfe.double().mean()),
                     "wall_s": wall, "ms_per_pass": 1e3 * wall / passes,
                     "host_reads_per_pass": reads / passes}
        rows.append([spec, f"{100 * solved:.1f}", float(res.nfe.double().mean()), passes,
                     wall, 1e3 * wall / passes, reads / passes])
    _table(f"shipped Sudoku model, {n} hard puzzles in one batch",
           ["sampler", "solved %", "mean NFE", "passes", "wall s", "ms/pass",
            "host reads/pass"], rows)
    out["text"] = _shipped_text(run)
    return out


def _shipped_text(run: Run) -> list[dict]:
    """The shipped text model (``unmask generate``'s default): tokens/s at batch 1 and 64,
    gen 64 in blocks of 16, confidence and EB."""
    from unmask.generate import generate
    from unmask.models.auto import load_model

    model = load_model("text", device=run.device)
    prompts = [f"Q: {i} + {i + 3}? A:" for i in range(64)]
    out, rows = [], []
    for spec in ("confidence", "eb:gamma=0.1"):
        for batch in (1, 64 if not run.args.dry_run else 4):
            def call(batch=batch, spec=spec):
                return generate(model, None, prompts[:batch], sampler=spec, gen_length=64,
                                block_length=16, stop_at_eos=False)
            call()  # warm-up
            wall, gens = run.timed(call)
            nfe = max(g.nfe for g in gens)
            out.append({"sampler": spec, "batch": batch, "tok_s": batch * 64 / wall,
                        "passes": nfe, "ms_per_pass": 1e3 * wall / nfe})
            rows.append([spec, batch, batch * 64 / wall, nfe, 1e3 * wall / nfe])
    _table("shipped text model, gen 64, blocks of 16",
           ["sampler", "batch", "tok/s", "passes", "ms/pass"], rows)
    return out


# ------------------------------------------------------------------ LLaDA-8B shape


def _prompts(n: int, length: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(f"w{rng.randrange(3, 90)}" for _ in range(length)) for _ in range(n)]


def _build(run: Run, family: str):
    import dllm_models

    from unmask.models.hf import HFMaskedModel

    shape = run.shape[family]
    if isinstance(shape, str):
        shape = getattr(dllm_models, shape)
    make = dllm_models.llada_in_place if family == "llada" else dllm_models.dream_in_place
    dtype = torch.bfloat16 if run.device.type == "cuda" or run.args.dry_run else torch.float32
    wall, (hf, tok) = run.timed(lambda: make(Path(tempfile.mkdtemp()) / family,
                                             device=run.device, dtype=dtype,
                                             sharpen=run.args.sharpen, **shape))
    params = sum(p.numel() for p in hf.parameters())
    print(f"\n{family}: {params / 1e9:.2f} B parameters ({dtype}) built in {wall:.1f} s",
          flush=True)
    return HFMaskedModel(hf, tok), {"parameters": params, "build_s": wall, "shape": shape}


def _bandwidth(run: Run) -> float:
    """Device copy bandwidth, bytes/s (read + write of a 1 GiB buffer; 8 MiB dry)."""
    n = (1 << 30) if run.device.type == "cuda" else (1 << 23)
    a = torch.empty(n, dtype=torch.uint8, device=run.device)
    b = torch.empty_like(a)
    b.copy_(a)
    wall, _ = run.timed(lambda: [b.copy_(a) for _ in range(5)])
    return 2 * 5 * n / wall


def _pass_times(run: Run, model, compile_too: bool) -> dict:
    """One batch-1 pass (prompt + gen positions) eager and compiled, against the weight-read
    bound."""
    from unmask.compiled import compiled

    n = run.shape["prompt"] + run.shape["gen"]
    x = torch.randint(3, 90, (1, n), device=run.device)
    weight_bytes = sum(p.numel() * p.element_size() for p in model.hf.parameters())
    bw = _bandwidth(run)
    out = {"weight_bytes": weight_bytes, "copy_bandwidth_Bps": bw,
           "bound_ms": 1e3 * weight_bytes / bw}

    def best(k: int = 5) -> float:
        with torch.inference_mode():
            model.hf(input_ids=x)  # warm-up (and, compiled, the compile)
            model.hf(input_ids=x)
            return min(run.timed(lambda: model.hf(input_ids=x))[0] for _ in range(k))

    out["eager_ms"] = 1e3 * best()
    if compile_too:
        with compiled(model):
            out["compiled_ms"] = 1e3 * best()
    rows = [["eager", out["eager_ms"], out["eager_ms"] / out["bound_ms"]]]
    if "compiled_ms" in out:
        rows.append(["compiled", out["compiled_ms"], out["compiled_ms"] / out["bound_ms"]])
    _table(f"one batch-1 pass of {n} positions; bound {out['bound_ms']:.2f} ms "
           f"({weight_bytes / 1e9:.1f} GB at {bw / 1e12:.2f} TB/s copy)",
           ["mode", "ms", "x bound"], rows)
    return out


def _noise(run: Run, model) -> dict:
    """The loop's draw for sampling at temperature > 0 (Gumbel noise over (b, block, V) in
    float64, :func:`unmask.rng.row_gumbel`) beside one eager pass of b rows (prompt + gen
    positions), at batch 1 and the run's batch: what temperature adds to a pass."""
    out, rows = {}, []
    for b in sorted({1, run.shape["batch"]}):
        noise_s, pass_s = _noise_and_pass(run, model, b)
        out[f"b{b}"] = {"noise_ms": 1e3 * noise_s, "pass_ms": 1e3 * pass_s}
        rows.append([b, 1e3 * noise_s, 1e3 * pass_s, noise_s / pass_s])
    _table(f"temperature noise over ({run.shape['block']}, {model.vocab_size}) a row against "
           "one eager pass", ["batch", "noise ms", "pass ms", "noise / pass"], rows)
    return out


def _noise_and_pass(run: Run, model, b: int) -> tuple[float, float]:
    """(seconds of the Gumbel draw, seconds of one eager pass) at batch ``b``, best of 3."""
    from unmask.rng import row_gumbel

    n, shape = run.shape["prompt"] + run.shape["gen"], (run.shape["block"], model.vocab_size)
    seeds = torch.arange(b, device=run.device)
    steps = torch.full((b,), 7, device=run.device)
    x = torch.randint(3, 90, (b, n), device=run.device)

    def best(fn) -> float:
        fn()  # warm-up
        return min(run.timed(fn)[0] for _ in range(3))

    with torch.inference_mode():
        return (best(lambda: row_gumbel(seeds, steps, 0, shape)),
                best(lambda: model.hf(input_ids=x)))


def _unmask(run: Run, model, prompts, spec, steps, cache, block=None, **kw):
    """(wall s, token ids per row, passes) of unmask ``generate`` in blocks of ``block``
    (default: the run's)."""
    from unmask.generate import generate

    wall, gens = run.timed(lambda: generate(
        model, None, prompts, sampler=spec, gen_length=run.shape["gen"],
        block_length=block or run.shape["block"], steps=steps, stop_at_eos=False,
        cache_kv=cache, **kw))
    return wall, [g.token_ids for g in gens], sum(g.nfe for g in gens)


def _reference(run: Run, model, prompts, kw, steps, cache, block=None):
    import dllm_models

    fn = getattr(dllm_models.fastdllm_generate(), REFERENCES[cache])

    def rows():
        tokens, nfe = [], 0
        for p in prompts:
            ids = torch.tensor([model.tokenizer(p)["input_ids"]], device=run.device)
            x, n = fn(model.hf, ids, steps=steps, gen_length=run.shape["gen"],
                      block_length=block or run.shape["block"], temperature=0.0,
                      mask_id=model.mask_id,
                      **kw)
            tokens.append(x[0, ids.shape[1]:].tolist())
            nfe += int(n)
        return tokens, nfe

    wall, (tokens, nfe) = run.timed(rows)
    return wall, tokens, nfe


def _engines(run: Run, model, prompts_all) -> list[dict]:
    """unmask against Fast-dLLM's functions, every rule, cache and batch."""
    out, rows = [], []
    for batch in (1, run.shape["batch"]):
        prompts = prompts_all[:batch]
        for rule, (spec, kw) in RULES.items():
            steps = run.shape["steps"] if rule == "low-confidence" else None
            ref_steps = steps or run.shape["gen"] // run.shape["block"]
            for cache in REFERENCES:
                if run.left() < 60:
                    run.results["skipped"].append(f"llada engines {rule} {cache} b{batch}")
                    continue
                # untimed first runs: kernels and LLaDA's compiled attention meet their
                # shapes (the references run batch-1 shapes at every batch)
                _unmask(run, model, prompts, spec, steps, cache)
                if batch == 1:
                    _reference(run, model, prompts, kw, ref_steps, cache)
                with ModelSpans(model.hf, run.device) as u_spans:
                    u = _unmask(run, model, prompts, spec, steps, cache)
                with ModelSpans(model.hf, run.device) as r_spans:
                    r = _reference(run, model, prompts, kw, ref_steps, cache)
                n_tok = batch * run.shape["gen"]
                same = sum(a == b for a, b in zip(u[1], r[1], strict=True))
                # the time a model call spends outside the model's forward: the loop's
                # work, its host reads and the gaps they leave on the device
                outside = [1e3 * (wall - spans.seconds) / max(spans.calls, 1)
                           for wall, spans in ((u[0], u_spans), (r[0], r_spans))]
                out.append({"rule": rule, "batch": batch, "cache": cache or "none",
                            "unmask_tok_s": n_tok / u[0], "ref_tok_s": n_tok / r[0],
                            "ratio": r[0] / u[0], "same_rows": same, "rows": batch,
                            "unmask_nfe": u[2], "ref_nfe": r[2], "unmask_ms_per_pass":
                            1e3 * u[0] / max(u[2] / batch, 1),
                            "unmask_model_calls": u_spans.calls,
                            "ref_model_calls": r_spans.calls,
                            "unmask_outside_ms_per_call": outside[0],
                            "ref_outside_ms_per_call": outside[1]})
                rows.append([rule, batch, cache or "none", n_tok / u[0], n_tok / r[0],
                             f"{r[0] / u[0]:.2f}x", f"{same}/{batch}", u[2], r[2],
                             f"{outside[0]:.3g} / {outside[1]:.3g}"])
    _table("unmask generate vs Fast-dLLM (same model, greedy)",
           ["rule", "batch", "cache", "unmask tok/s", "Fast-dLLM tok/s", "ratio",
            "same tokens", "unmask NFE", "ref NFE", "ms a model call outside it (unmask / "
            "ref)"], rows)
    return out


def _layout(run: Run, model) -> dict:
    """Batch 1, one block of gen, a prompt of 5/8 of a block: the row as the prompt then the
    masks (unmask's default, Fast-dLLM's layout) against the prompt slots padded to the
    block (``pad_to_multiple_of``), low-confidence at the run's steps; wall, positions a pass
    and tokens against Fast-dLLM's ``generate``."""
    gen, steps = run.shape["gen"], run.shape["steps"]
    from unmask.generate import encode_prompt, prompt_batch

    (prompt,) = _prompts(1, run.shape["block"] * 5 // 8, seed=1)
    ids = encode_prompt(model.tokenizer, prompt)
    n_prompt = len(ids)
    rows, out = [], {}
    for name, pad_to in (("padded", gen), ("exact", None)):
        _unmask(run, model, [prompt], "confidence", steps, None, block=gen,
                pad_to_multiple_of=pad_to)  # untimed: kernels meet the shapes
        wall, tokens, nfe = _unmask(run, model, [prompt], "confidence", steps, None,
                                    block=gen, pad_to_multiple_of=pad_to)
        width = prompt_batch(model, [ids], gen, gen, pad_to_multiple_of=pad_to)[0].shape[1]
        out[name] = {"wall_s": wall, "positions": width, "nfe": nfe, "tokens": tokens[0]}
    ref_wall, ref_tokens, ref_nfe = _reference(run, model, [prompt], {}, steps, None, block=gen)
    for name in ("padded", "exact"):
        r = out[name]
        r["same_as_reference"] = r.pop("tokens") == ref_tokens[0]
        rows.append([name, r["positions"], r["nfe"], r["wall_s"],
                     f"{r['wall_s'] / out['padded']['wall_s']:.2f}x", r["same_as_reference"]])
    rows.append(["Fast-dLLM generate", n_prompt + gen, ref_nfe, ref_wall, "", ""])
    out["reference"] = {"wall_s": ref_wall, "nfe": ref_nfe}
    _table(f"prompt layout: batch 1, one block of {gen}, a {n_prompt}-token prompt",
           ["layout", "positions", "NFE", "wall s", "vs padded", "same as Fast-dLLM"], rows)
    return out


def _batch_equality(run: Run, model, prompts) -> dict:
    """Batch B against each row alone (low-confidence, no cache): default and
    batch_invariant; and the bf16 GEMM at the model's width for B rows' positions."""
    spec, steps = "confidence", run.shape["steps"]
    alone = [_unmask(run, model, [p], spec, steps, None)[1][0] for p in prompts]
    out = {}
    for mode in (False, True):
        wall, tokens, _ = _unmask(run, model, prompts, spec, steps, None, batch_invariant=mode)
        out["batch_invariant" if mode else "default"] = {
            "same_rows": sum(a == b for a, b in zip(tokens, alone, strict=True)),
            "rows": len(prompts), "wall_s": wall}
    out["gemm"] = _gemm_rows(run, model)
    _table(f"batch {len(prompts)} against each row alone (low-confidence, no cache)",
           ["mode", "rows equal to alone", "wall s"],
           [[k, f"{v['same_rows']}/{v['rows']}", v["wall_s"]] for k, v in out.items()
            if k != "gemm"])
    _table("bf16 GEMM: one row's positions computed alone vs inside the batch's",
           ["weight", "reduced-precision reduction", "bitwise equal", "max |diff|"],
           [[g["weight"], g["reduced_precision_reduction"], g["equal"], g["max_abs_diff"]]
            for g in out["gemm"]])
    return out


@torch.no_grad()
def _gemm_rows(run: Run, model) -> list[dict]:
    """The first row's positions through each distinct linear weight shape, alone (M = n)
    and inside B rows' (M = B n), with bf16 reduced-precision reductions on and off."""
    n = run.shape["prompt"] + run.shape["gen"]
    shapes = {}
    for name, p in model.hf.named_parameters():
        if p.dim() == 2 and "wte" not in name and "embed" not in name:
            shapes.setdefault(tuple(p.shape), (name, p))
    out = []
    flag = torch.backends.cuda.matmul
    saved = flag.allow_bf16_reduced_precision_reduction
    try:
        for reduced in (True, False):
            flag.allow_bf16_reduced_precision_reduction = reduced
            for name, w in shapes.values():
                x = torch.randn(run.shape["batch"] * n, w.shape[1], device=run.device,
                                dtype=w.dtype)
                alone = torch.nn.functional.linear(x[:n], w)
                inside = torch.nn.functional.linear(x, w)[:n]
                out.append({"weight": f"{name} {tuple(w.shape)}",
                            "reduced_precision_reduction": reduced,
                            "equal": bool(torch.equal(alone, inside)),
                            "max_abs_diff": float((alone.float() - inside.float()).abs().max())})
    finally:
        flag.allow_bf16_reduced_precision_reduction = saved
    return out


def _compiled_generate(run: Run, model, prompt) -> dict:
    """--compile against eager at batch 1, dual cache, low-confidence: tokens and speed."""
    spec, steps = "confidence", run.shape["steps"]
    eager = _unmask(run, model, [prompt], spec, steps, "dual")
    _unmask(run, model, [prompt], spec, steps, "dual", compile=True)  # compiles
    fast = _unmask(run, model, [prompt], spec, steps, "dual", compile=True)
    out = {"eager_tok_s": run.shape["gen"] / eager[0], "compiled_tok_s": run.shape["gen"]
           / fast[0], "same_tokens": eager[1] == fast[1], "nfe": fast[2],
           "compiled_ms_per_pass": 1e3 * fast[0] / fast[2],
           "eager_ms_per_pass": 1e3 * eager[0] / eager[2]}
    _table("generate --compile vs eager (batch 1, dual cache, low-confidence)",
           ["eager tok/s", "compiled tok/s", "eager ms/pass", "compiled ms/pass",
            "same tokens"],
           [[out["eager_tok_s"], out["compiled_tok_s"], out["eager_ms_per_pass"],
             out["compiled_ms_per_pass"], out["same_tokens"]]])
    return out


class _PipelineModel(torch.nn.Module):
    """LLaDA's module as the pipeline calls a model: ``position_ids`` (which LLaDA's forward
    does not take; its rotary positions count from 0 as the pipeline's do) dropped."""

    def __init__(self, hf):
        super().__init__()
        self.hf, self.config = hf, hf.config

    @property
    def dtype(self):
        return next(self.hf.parameters()).dtype

    @property
    def device(self):
        return next(self.hf.parameters()).device

    def forward(self, input_ids, attention_mask=None, position_ids=None, **kwargs):
        return self.hf(input_ids=input_ids, attention_mask=attention_mask)


def _diffusers(run: Run, model, prompts) -> dict:
    """diffusers' LLaDA2Pipeline (threshold 0.9, block refinement) beside unmask's threshold
    rule on the same model, batch 1 and B. The pipeline runs the model on the prefix up to
    the current block (LLaDA2 is block-causal); this model is bidirectional, so tokens may
    differ: the row is about speed."""
    try:
        import diffusers
    except ImportError:
        return {"skipped": "diffusers is not installed"}
    pipe = diffusers.LLaDA2Pipeline(model=_PipelineModel(model.hf),
                                    scheduler=diffusers.BlockRefinementScheduler(),
                                    tokenizer=model.tokenizer)
    pipe.set_progress_bar_config(disable=True)
    out, rows = [], []
    for batch in (1, run.shape["batch"]):
        ids = torch.tensor([model.tokenizer(p)["input_ids"] for p in prompts[:batch]],
                           device=run.device)

        def call(ids=ids):
            return pipe(input_ids=ids, use_chat_template=False, gen_length=run.shape["gen"],
                        block_length=run.shape["block"], num_inference_steps=run.shape["block"],
                        threshold=0.9, editing_threshold=None, minimal_topk=1,
                        eos_early_stop=False, sampling_method="greedy", temperature=0.0,
                        output_type="seq")

        call()  # warm-up
        wall, res = run.timed(call)
        u = _unmask(run, model, prompts[:batch], "threshold:tau=0.9", None, None)
        theirs = [row[ids.shape[1]:].tolist() if len(row) > run.shape["gen"] else row.tolist()
                  for row in res.sequences]
        same = sum(a == b for a, b in zip(u[1], theirs, strict=True))
        n_tok = batch * run.shape["gen"]
        out.append({"batch": batch, "pipeline_tok_s": n_tok / wall, "unmask_tok_s":
                    n_tok / u[0], "ratio": wall / u[0], "same_rows": same})
        rows.append([batch, n_tok / wall, n_tok / u[0], f"{wall / u[0]:.2f}x", f"{same}/{batch}"])
    _table("diffusers LLaDA2Pipeline vs unmask (threshold 0.9; the pipeline is block-causal, "
           "so its tokens may differ)",
           ["batch", "pipeline tok/s", "unmask tok/s", "ratio", "same tokens"], rows)
    return {"rows": out}


def section_llada(run: Run) -> dict:
    model, out = _build(run, "llada")
    prompts = _prompts(run.shape["batch"], run.shape["prompt"])
    compile_too = not run.args.no_compile
    # what matters most first; a part starts only with time for it (the compiles take a
    # minute or more on an 8 B model) and for the Dream section after
    parts = [("engines", lambda: _engines(run, model, prompts), 60),
             ("layout", lambda: _layout(run, model), 30),
             ("batch_equality", lambda: _batch_equality(run, model, prompts), 40),
             ("pass", lambda: _pass_times(run, model, compile_too=compile_too), 150 if
              compile_too else 30),
             ("noise", lambda: _noise(run, model), 15),
             ("compile", lambda: (_compiled_generate(run, model, prompts[0]) if compile_too
                                  else {"skipped": "--no-compile"}), 120 if compile_too else 0),
             ("diffusers", lambda: _diffusers(run, model, prompts), 60)]
    for name, part, need in parts:
        _part(run, out, name, part, need)
    model = None  # free the weights before the next section
    _free(run)
    return out


def section_dream(run: Run) -> dict:
    """unmask (confidence, one block, one position a pass) against Dream's own
    ``diffusion_generate`` (maskgit_plus, ``steps = gen``): the same passes, timed.

    Tokens are compared where Dream's choices are unmask's: its float32 step counts reveal
    nothing at one of ``gen`` steps (``dllm_models.dream_counts``), but are gen / 2 twice at
    2 steps; and its sampler takes the softmax in the logits' dtype, where bf16 ties and
    rounding reorder near-equal confidences, so for the comparison its logits are float32
    (unmask's log-softmax is float32 whatever the model's dtype). The prompts are ``gen``
    tokens long: unmask left-pads a prompt to whole blocks (here one block of ``gen``), and
    a padded layout gives other bf16 roundings (and more positions a pass) than Dream's."""
    from dllm_models import dream_counts

    model, out = _build(run, "dream")
    gen = run.shape["gen"]
    prompts = _prompts(run.shape["batch"], gen)

    def ref(ids, steps, float_logits=False):
        hook = (model.hf.lm_head.register_forward_hook(lambda m, i, o: o.float())
                if float_logits else None)
        try:
            with contextlib.redirect_stdout(None):  # it prints its steps and time
                x = model.hf.diffusion_generate(ids, model.hf.generation_config,
                                                max_new_tokens=gen, steps=steps,
                                                alg="maskgit_plus", temperature=0.0, eps=0.0)
        finally:
            if hook is not None:
                hook.remove()
        seqs = x.sequences if hasattr(x, "sequences") else x
        return [row[ids.shape[1]:].tolist() for row in seqs]

    def engines():
        rows, res = [], []
        for batch in (1, run.shape["batch"]):
            ids = torch.tensor([model.tokenizer(p)["input_ids"] for p in prompts[:batch]],
                               device=run.device)
            # untimed first runs: the kernels meet their shapes
            ref(ids, gen)
            _unmask(run, model, prompts[:batch], "confidence", gen, None, block=gen)
            wall_r, _ = run.timed(lambda ids=ids: ref(ids, gen))
            u = _unmask(run, model, prompts[:batch], "confidence", gen, None, block=gen)
            two = _unmask(run, model, prompts[:batch], "confidence", 2, None, block=gen)[1]
            same = sum(a == b for a, b in zip(two, ref(ids, 2, float_logits=True),
                                              strict=True))
            n_tok = batch * gen
            res.append({"batch": batch, "unmask_tok_s": n_tok / u[0], "ref_tok_s":
                        n_tok / wall_r, "ratio": wall_r / u[0], "unmask_passes": u[2] / batch,
                        "same_rows_2_steps": same})
            rows.append([batch, n_tok / u[0], n_tok / wall_r, f"{wall_r / u[0]:.2f}x",
                         f"{same}/{batch}"])
        zeros = dream_counts(gen, gen, 0.0).count(0)
        _table(f"unmask (confidence, one block, {gen} passes) vs Dream's diffusion_generate "
               f"(maskgit_plus, {gen} steps, {zeros} revealing nothing)",
               ["batch", "unmask tok/s", "Dream tok/s", "ratio",
                "same tokens (2 steps, float32 logits)"], rows)
        return res

    _part(run, out, "engines", engines)
    model = None  # free the weights before the next section
    _free(run)
    return out


#: a compiled batch-1 pass of the LLaDA shape may take at most this many weight-read bounds
COMPILED_BOUND_X = 3.0


def targets(sections: dict) -> list[dict]:
    """The GPU targets, each ``{"target", "measured", "met"}`` (``met`` None where the run
    did not measure it), from the results' ``sections``: at batch 1 unmask at least as fast
    as Fast-dLLM with its tokens in every rule and cache row (with each engine's largest
    time a model call outside the model's forward, where the rows hold it); the compiled
    batch-1 pass within :data:`COMPILED_BOUND_X` of the weight-read bound; a batch equal to its rows
    alone, by default and batch-invariant; every sampler's host reads per pass within one
    of confidence's (the loop's own)."""
    llada, loop = sections.get("llada", {}), sections.get("loop", {})
    rows = [r for r in llada.get("engines", []) if isinstance(r, dict) and r.get("batch") == 1]
    every = len(RULES) * len(REFERENCES)  # rules x caches
    same = [r["same_rows"] == r["rows"] for r in rows]
    measured = "not run"
    if rows:
        measured = (f"ratio {min(r['ratio'] for r in rows):.2f}x at worst, same tokens "
                    f"{sum(same)}/{len(rows)} rows")
        if len(rows) < every:
            measured += f" ({len(rows)} of {every} run)"
        split = [r for r in rows if "unmask_outside_ms_per_call" in r]
        if split:  # where a slower row's time goes: the loop's, not the model's
            measured += (f"; outside the model, ms a call: unmask "
                         f"{max(r['unmask_outside_ms_per_call'] for r in split):.2f}, "
                         f"Fast-dLLM {max(r['ref_outside_ms_per_call'] for r in split):.2f}"
                         " at most")
    # a row left out for time leaves it open unless a row run already misses
    good = all(r["ratio"] >= 1.0 and s for r, s in zip(rows, same, strict=True))
    out = [{"target": "batch 1: >= Fast-dLLM's tok/s, same tokens, every rule and cache",
            "measured": measured,
            "met": False if not good else (True if len(rows) == every else None)}]
    p = llada.get("pass", {})
    x = p["compiled_ms"] / p["bound_ms"] if "compiled_ms" in p else None
    out.append({"target": f"--compile: batch-1 pass <= {COMPILED_BOUND_X:g}x the weight-read "
                          "bound",
                "measured": "not run" if x is None else f"{x:.2f}x",
                "met": None if x is None else x <= COMPILED_BOUND_X})
    for mode in ("default", "batch_invariant"):
        e = llada.get("batch_equality", {}).get(mode)
        out.append({"target": f"a batch equals its rows alone ({mode})",
                    "measured": f"{e['same_rows']}/{e['rows']} rows" if e else "not run",
                    "met": e["same_rows"] == e["rows"] if e else None})
    reads = {k: v["host_reads_per_pass"] for k, v in loop.items()
             if isinstance(v, dict) and "host_reads_per_pass" in v}
    worst = max(reads, key=reads.get) if "confidence" in reads else None
    out.append({"target": "host reads per pass within 1 of the loop's own, every sampler",
                "measured": (f"{worst} {reads[worst]:.2f} vs confidence "
                             f"{reads['confidence']:.2f}" if worst else "not run"),
                "met": reads[worst] <= reads["confidence"] + 1 if worst else None})
    return out


def _part(run: Run, out: dict, name: str, part, need: float = 30) -> None:
    """``out[name] = part()``, unless fewer than ``need`` seconds of the budget are left
    (then skipped) or it fails (then its error). A part that returns ``{"skipped": reason}``
    (an option turned it off, a package is missing) is listed as ``"name: reason"``."""
    if run.left() < need:
        run.results["skipped"].append(name)
        return
    try:
        out[name] = part()
        if isinstance(out[name], dict) and "skipped" in out[name]:
            run.results["skipped"].append(f"{name}: {out[name]['skipped']}")
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as e:  # one failed part must not cost the others (nor a pytest
        # skip, should one come from the model helpers)
        out[name] = {"error": f"{type(e).__name__}: {e}"}
        run.results["errors"].setdefault(name, []).append(out[name]["error"])
        print(f"\n{name} failed: {type(e).__name__}: {e}\n{traceback.format_exc(limit=3)}",
              flush=True)
    run.save()  # the part's result or error, and its listing, on disk before the next part


def _free(run: Run) -> None:
    gc.collect()
    if run.device.type == "cuda":
        torch.cuda.empty_cache()


SECTIONS = {"loop": section_loop, "sudoku": section_sudoku, "llada": section_llada,
            "dream": section_dream}
#: seconds a section needs left to start
NEEDS = {"loop": 30, "sudoku": 30, "llada": 120, "dream": 45}


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="gpu.json")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--sections", nargs="+", choices=list(SECTIONS), default=list(SECTIONS))
    ap.add_argument("--budget-s", type=float, default=450.0,
                    help="start no part after this many seconds")
    ap.add_argument("--sharpen", type=float, default=4.0,
                    help="scale of the random output layers (confident predictions)")
    ap.add_argument("--no-compile", action="store_true", help="skip the torch.compile rows")
    ap.add_argument("--dry-run", action="store_true",
                    help="tiny shapes on the CPU (checks the whole run in seconds)")
    args = ap.parse_args(argv)
    if args.dry_run:
        args.device, args.no_compile = "cpu", True
        torch._dynamo.config.disable = True  # LLaDA's code compiles its attention
    import sys

    for extra in (ROOT / "benchmarks", ROOT / "tests" / "hf"):
        if str(extra) not in sys.path:
            sys.path.insert(0, str(extra))
    run = Run(args)
    for name in args.sections:
        _part(run, run.results["sections"], name, lambda f=SECTIONS[name]: f(run), NEEDS[name])
    run.results["targets"] = targets(run.results["sections"])
    _table("targets" + (" (dry run: tiny shapes on the CPU; its speeds mean nothing)"
                        if args.dry_run else ""), ["target", "measured", "met"],
           [[t["target"], t["measured"], "-" if t["met"] is None else t["met"]]
            for t in run.results["targets"]])
    run.results["complete"] = True
    run.save()
    print(f"\nwall {run.results['wall_s']:.0f} s; skipped: {run.results['skipped'] or 'none'};"
          f" failed: {sorted(run.results['errors']) or 'none'}; wrote {args.out}")
    return run.results


if __name__ == "__main__":
    main()
