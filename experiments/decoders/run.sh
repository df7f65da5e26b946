#!/usr/bin/env bash
# The field's parallel decoders on the shipped Sudoku model, 100 hard puzzles, one thread.
# Run from the repository root; writes the two JSON files next to this script.
set -euo pipefail
out=experiments/decoders
python -m unmask sudoku bench --set hard --limit 100 --threads 1 \
    --samplers confidence dus factor:f=1 dapd demask eb:gamma=0.05,order=confidence \
    --json "$out/sudoku_hard100.json"
python -m unmask sudoku bench --set hard --limit 100 --threads 1 \
    --samplers confidence factor:f=0.5 factor:f=0.25 dus:base=3 dapd:tau=4 \
    dapd:min_confidence=0.9 dapd:tau=0.5,min_confidence=0.9 dapd:tau=2,min_confidence=0.7 \
    demask:bound=0.01 demask:bound=0.002 demask:bound=0.01,aggregate=sum \
    --json "$out/sudoku_hard100_sweep.json"
