#!/usr/bin/env bash
# Random masking (60-90%) of held-out heavy chains under AntiBERTy: sequential confidence,
# EB-Sampler and MI-guided (EB's bound plus the MI term, shipped estimator) over a gamma
# sweep, one JSON file per spec (rerunning skips the files already written).
#   LIMIT=100 experiments/antibody_decoding/run.sh
set -euo pipefail
cd "$(dirname "$0")"
LIMIT=${LIMIT:-100}
SPECS=(
  confidence
  "eb:gamma=1" "mi-guided:gamma=1,free_max=true,stop_at_first_miss=true"
  "mi-guided:gamma=2,free_max=true,stop_at_first_miss=true" "eb:gamma=0.3" "eb:gamma=0.5"
  "mi-guided:gamma=3,free_max=true,stop_at_first_miss=true" "eb:gamma=2" "eb:gamma=0.1"
  "mi-guided:gamma=0.5,free_max=true,stop_at_first_miss=true" "topk:k=4" "threshold:tau=0.9"
)
for spec in "${SPECS[@]}"; do
  out="results/random_${LIMIT}_$(echo "$spec" | tr ':=,' '___').json"
  [[ -f $out ]] && continue
  python -m unmask antibody bench --settings random --limit "$LIMIT" --samplers "$spec" \
    --no-perplexity --threads 1 --seed 0 --quiet --json "$out"
  echo "done: $spec"
done
