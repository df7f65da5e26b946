"""Merge bench JSONs of disjoint sampler lists run with the same model, --n and --seed.

Usage: python experiments/image/merge.py OUT.json IN.json [IN.json ...]
"""

import json
import sys

out, *parts = sys.argv[1:]
docs = [json.load(open(p)) for p in parts]
for key in ("model", "classifier", "n", "seed", "real"):
    assert all(d[key] == docs[0][key] for d in docs), f"{key} differs between the parts"
merged = {**docs[0], "rows": [r for d in docs for r in d["rows"]]}
with open(out, "w") as f:
    json.dump(merged, f, indent=2)
    f.write("\n")
