"""Record the fixture of ``training_cases``: ``python tests/regression/record_trainings.py``;
with ``--check``, compare this machine's runs with the fixture exactly (sha256 of the weights)
instead, the check of a change that must leave training untouched."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from training_cases import CASES, run_case  # noqa: E402

FIXTURE = HERE / "trainings.json"


def main() -> None:
    check = "--check" in sys.argv[1:]
    names = [a for a in sys.argv[1:] if not a.startswith("--")] or list(CASES)
    pinned = json.loads(FIXTURE.read_text()) if FIXTURE.is_file() else {}
    out = dict(pinned)
    for name in names:
        start = time.perf_counter()
        out[name] = run_case(name)
        same = pinned.get(name, {}).get("sha256") == out[name]["sha256"]
        print(f"{time.perf_counter() - start:6.2f}s {name:18s} {out[name]['sha256'][:16]} "
              f"{'identical' if same else 'DIFFERS' if name in pinned else 'new'}", flush=True)
    if not check:
        FIXTURE.write_text(json.dumps(out, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
