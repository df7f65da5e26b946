"""Record the fixture of ``decode_cases``: ``python tests/regression/record_decodes.py``."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import torch  # noqa: E402
from decode_cases import CASES, run_case  # noqa: E402

FIXTURE = HERE / "decodes.json"


def main() -> None:
    torch.set_num_threads(1)  # one thread: the same float reductions on every machine
    out = {}
    for case in CASES:
        start = time.perf_counter()
        out[case["id"]] = run_case(case)
        print(f"{time.perf_counter() - start:6.2f}s {case['id']}", flush=True)
    FIXTURE.write_text(json.dumps(out, indent=0, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
