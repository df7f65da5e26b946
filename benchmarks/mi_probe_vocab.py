"""Perturbation probing at a real vocabulary size: cost and peak memory per context.

Builds a tiny random BERT masked LM with |V| = 30,000 word pieces (written by ``transformers``
into a temporary folder; ``--init`` sets its initializer range: 1.0 gives peaked marginals, as a
trained model's are, 0.02 near-uniform ones) and probes contexts of several lengths and mask
ratios. Per context: sequences evaluated against the naive 1 + |M||V| and the support floor
1 + sum_i |{v : p_i(v) >= eps}|, the ratio naive / evaluated, sequences per model call, wall time,
and the peak resident memory of the process during the call and above the level before it
(sampled every 2 ms from /proc/self/statm, after glibc's malloc_trim returned freed memory),
beside what one call of ``--batch-size`` sequences (the chunk without the logits bound) would
need for its float32 logits alone.

    PYTHONPATH=src python benchmarks/mi_probe_vocab.py [--vocab 30000] [--eps 1e-3]
"""

from __future__ import annotations

import argparse
import ctypes
import os
import tempfile
import threading
import time
from pathlib import Path

import torch

from unmask.mi import floor_sequences, naive_sequences, perturbation_mi
from unmask.mi.probe import MAX_LOGITS, chunk_size
from unmask.models.auto import load_model

PAGE = os.sysconf("SC_PAGE_SIZE")


def trim() -> None:
    """Return freed heap memory to the system, so RSS before a call is its true base."""
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


def rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * PAGE


class PeakRSS:
    """Peak resident memory above the level at entry, sampled from a thread."""

    def __enter__(self):
        trim()
        self.base = self.peak = rss()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def _run(self):
        while not self._stop.wait(0.002):
            self.peak = max(self.peak, rss())

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, rss())

    @property
    def above(self) -> int:
        return self.peak - self.base


def write_bert(path: Path, vocab_size: int, init: float, max_length: int) -> Path:
    import transformers

    transformers.utils.logging.disable_progress_bar()
    path.mkdir(parents=True, exist_ok=True)
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    vocab += [f"w{i}" for i in range(vocab_size - len(vocab))]
    (path / "vocab.txt").write_text("\n".join(vocab) + "\n")
    tok = transformers.BertTokenizer(str(path / "vocab.txt"))
    cfg = transformers.BertConfig(vocab_size=vocab_size, hidden_size=32, num_hidden_layers=2,
                                  num_attention_heads=2, intermediate_size=64,
                                  max_position_embeddings=max_length, initializer_range=init)
    torch.manual_seed(0)
    transformers.BertForMaskedLM(cfg).eval().save_pretrained(str(path))
    tok.save_pretrained(str(path))
    return path


def context(model, n: int, ratio: float, seed: int) -> torch.Tensor:
    """(1, n) [CLS] random real tokens [SEP], round(ratio (n - 2)) of them masked."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.tensor(model.real_token_ids)
    x = ids[torch.randint(0, len(ids), (1, n), generator=g)]
    x[0, 0], x[0, -1] = model.tokenizer.cls_token_id, model.tokenizer.sep_token_id
    k = max(1, round(ratio * (n - 2)))
    x[0, 1 + torch.randperm(n - 2, generator=g)[:k]] = model.mask_id
    return x


def mib(n: int) -> str:
    return f"{n / 2**20:,.0f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--vocab", type=int, default=30_000)
    ap.add_argument("--init", type=float, default=1.0, help="BERT initializer_range")
    ap.add_argument("--lengths", default="16,32")
    ap.add_argument("--ratios", default="0.25,1.0")
    ap.add_argument("--eps", type=float, default=1e-3)
    ap.add_argument("--top-k", default="none,8", help="top_k values ('none' = no cap)")
    ap.add_argument("--batch-size", type=int, default=4096)
    ap.add_argument("--max-logits", type=int, default=MAX_LOGITS)
    ap.add_argument("--threads", type=int, default=None)
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    lengths = [int(s) for s in args.lengths.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        model = load_model(write_bert(Path(tmp) / "bert", args.vocab, args.init,
                                      max(lengths)))
    v, r = model.vocab_size, len(model.real_token_ids)
    print(f"random BERT: |V| = {v:,} ({r:,} real), hidden 32, 2 layers, initializer_range "
          f"{args.init}; eps {args.eps:g}, batch_size {args.batch_size}, max_logits "
          f"{args.max_logits:,}; {torch.get_num_threads()} threads\n")
    header = ("| N | ratio | top_k | masked | sequences | naive 1+M V | floor | naive/seq | "
              "seq/call | calls | wall s | peak RSS MiB | above entry MiB | unbounded call MiB |")
    print(header)
    print("|" + "---|" * (header.count("|") - 1))
    seed = 0
    for n in lengths:
        for ratio in (float(s) for s in args.ratios.split(",")):
            seed += 1
            x = context(model, n, ratio, seed)
            m = int((x == model.mask_id).sum())
            naive = int(naive_sequences(x, model.mask_id, r).sum())
            for k in args.top_k.split(","):
                top_k = None if k == "none" else int(k)
                t0 = time.perf_counter()
                with PeakRSS() as mem:
                    res = perturbation_mi(model, x, eps=args.eps, batch_size=args.batch_size,
                                          top_k=top_k, max_logits=args.max_logits)
                wall = time.perf_counter() - t0
                floor = int(floor_sequences(res).sum())
                per_call = chunk_size(args.batch_size, n, v, args.max_logits)
                naive_call = min(args.batch_size, naive) * n * v * 4  # float32 logits
                print(f"| {n} | {ratio:g} | {k} | {m} | {res.sequences:,} | {naive:,} | "
                      f"{floor:,} | {naive / res.sequences:,.0f}x | {per_call} | "
                      f"{res.model_calls} | {wall:.1f} | {mib(mem.peak)} | {mib(mem.above)} | "
                      f"{mib(naive_call)} |",
                      flush=True)


if __name__ == "__main__":
    main()
