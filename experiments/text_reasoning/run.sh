#!/usr/bin/env bash
# The text-reasoning benchmark of the shipped text MDM: every default sampler at T=0, and the
# greedy rules, Info-Gain and EB across temperatures (two processes, one thread each).
set -euo pipefail
cd "$(dirname "$0")/../.."
LIMIT=${LIMIT:-50}
unmask reasoning bench --limit "$LIMIT" --seed 0 --threads 1 --quiet \
  --json experiments/text_reasoning/bench_t0.json --plot experiments/text_reasoning/bench_t0.png \
  > experiments/text_reasoning/bench_t0.txt &
unmask reasoning bench --limit "$LIMIT" --seed 0 --threads 1 --quiet \
  --tasks basic_arithmetic chain_sum countdown mini_sudoku \
  --samplers confidence entropy margin info-gain eb:gamma=0.1 --temperatures 0.5,1.0,1.5 \
  --json experiments/text_reasoning/bench_temps.json > experiments/text_reasoning/bench_temps.txt &
wait
