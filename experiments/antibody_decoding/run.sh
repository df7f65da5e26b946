#!/usr/bin/env bash
# Random masking (60-90%) of held-out heavy chains under AntiBERTy: sequential confidence,
# EB-Sampler and MI-guided (EB's bound plus the MI term, shipped estimator) over a gamma
# sweep, one JSON file per spec (rerunning skips the files already written).
#   LIMIT=100 SEED=0 experiments/antibody_decoding/run.sh [SPEC ...]   (default: the list below)
set -euo pipefail
cd "$(dirname "$0")"
LIMIT=${LIMIT:-100}
SEED=${SEED:-0}
MI="free_max=true,stop_at_first_miss=true"
DEFAULT=(
  confidence
  "eb:gamma=1" "mi-guided:gamma=1,$MI" "mi-guided:gamma=2,$MI" "eb:gamma=0.3" "eb:gamma=0.5"
  "mi-guided:gamma=3,$MI" "eb:gamma=2" "eb:gamma=0.1"
  "eb:gamma=4" "mi-guided:gamma=5,$MI" "mi-guided:gamma=3,$MI,mi_cap=true" "eb:gamma=8"
  "mi-guided:gamma=8,$MI" "mi-guided:gamma=2,$MI,mi_cap=true" "topk:k=4" "threshold:tau=0.9"
)
SPECS=("${@:-${DEFAULT[@]}}")
for spec in "${SPECS[@]}"; do
  out="results/random_${LIMIT}_$([[ $SEED == 0 ]] || echo "seed${SEED}_")$(echo "$spec" | tr ':=,' '___').json"
  [[ -f $out ]] && continue
  python -m unmask antibody bench --settings random --limit "$LIMIT" --samplers "$spec" \
    --no-perplexity --threads 1 --seed "$SEED" --quiet --json "$out"
  echo "done: $spec"
done
