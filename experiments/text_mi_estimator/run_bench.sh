#!/usr/bin/env bash
# MI-guided decoding with the shipped text estimator against EB-Sampler at matched passes on
# the four reasoning tasks the shipped text model can do (LIMIT problems each, T=0). The shard
# cache makes a killed run resume.
#   LIMIT=100 CACHE=/tmp/reasoning_cache experiments/text_mi_estimator/run_bench.sh [SPEC ...]
set -euo pipefail
cd "$(dirname "$0")"
LIMIT=${LIMIT:-100}
MI="free_max=true,stop_at_first_miss=true"
DEFAULT=(
  confidence "eb:gamma=0.1" "eb:gamma=0.3" "eb:gamma=1" "eb:gamma=3"
  "mi-guided:gamma=0.1,$MI" "mi-guided:gamma=0.3,$MI" "mi-guided:gamma=1,$MI"
  "mi-guided:gamma=3,$MI" "mi-guided:gamma=0.3"
  "mi-guided:gamma=0.1,$MI,mi_cap=true" "mi-guided:gamma=0.3,$MI,mi_cap=true"
  "mi-guided:gamma=1,$MI,mi_cap=true" "mi-guided:gamma=3,$MI,mi_cap=true"
)
SPECS=("${@:-${DEFAULT[@]}}")
python -m unmask reasoning bench --limit "$LIMIT" --threads 1 --seed 0 --quiet \
  --tasks basic_arithmetic chain_sum countdown mini_sudoku --samplers "${SPECS[@]}" \
  ${CACHE:+--cache "$CACHE"} --json "results_reasoning_${LIMIT}.json"
