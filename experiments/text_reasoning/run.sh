#!/usr/bin/env bash
# The text-reasoning benchmark of the shipped text MDM: every default sampler at T=0; the
# greedy rules, Info-Gain and EB across temperatures; and confidence and Info-Gain across
# temperatures with --confidence max (three processes, one thread each).
set -euo pipefail
cd "$(dirname "$0")/../.."
LIMIT=${LIMIT:-50}
out=experiments/text_reasoning
unmask reasoning bench --limit "$LIMIT" --seed 0 --threads 1 --quiet \
  --json $out/bench_t0.json --plot $out/bench_t0.png > $out/bench_t0.txt &
unmask reasoning bench --limit "$LIMIT" --seed 0 --threads 1 --quiet \
  --tasks basic_arithmetic chain_sum countdown mini_sudoku \
  --samplers confidence entropy margin info-gain eb:gamma=0.1 --temperatures 0.5,1.0,1.5 \
  --json $out/bench_temps.json > $out/bench_temps.txt &
unmask reasoning bench --limit "$LIMIT" --seed 0 --threads 1 --quiet --confidence max \
  --tasks basic_arithmetic chain_sum countdown mini_sudoku \
  --samplers confidence info-gain --temperatures 0.5,1.0,1.5 \
  --json $out/bench_temps_confmax.json > $out/bench_temps_confmax.txt &
wait
