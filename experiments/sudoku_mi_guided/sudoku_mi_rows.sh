#!/usr/bin/env bash
# Every MI-guided row of the README's Sudoku tables, for one MI estimator: the 1,000 hard
# puzzles, a second 1,000 (scripts/make_sudoku_sets.py --kinds hard --seed 2001 --out
# runs/val), the corrector rows and the medium set. Sequential decoding and EB read no
# estimator, so their rows are not rerun; `unmask results pool` pairs these files
# with the runs that hold them (first file's row of a label wins).
#
# Usage: experiments/sudoku_mi_guided/sudoku_mi_rows.sh OUT [ESTIMATOR]
#   OUT        folder for hard.json, val.json, corrector.json, medium.json (+ .txt tables)
#   ESTIMATOR  estimator folder (default: the shipped one)
# Environment: THREADS (default 2), PYTHON (default .venv/bin/python), LIMIT (first N
# puzzles of each set, for a quick check; default all)
# About 35 minutes on two threads.
set -euo pipefail
OUT=${1:?usage: experiments/sudoku_mi_guided/sudoku_mi_rows.sh OUT [ESTIMATOR]}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
PY=${PYTHON:-$ROOT/.venv/bin/python}
THREADS=${THREADS:-2}
VAL=$ROOT/runs/val/hard.txt
EST=()
[[ $# -ge 2 ]] && EST=(--estimator "$2")
[[ -f $VAL ]] || "$PY" "$ROOT/scripts/make_sudoku_sets.py" --kinds hard --seed 2001 --out "$ROOT/runs/val"
export PYTHONPATH=$ROOT/src${PYTHONPATH:+:$PYTHONPATH}
mkdir -p "$OUT"
bench() { "$PY" -m unmask sudoku bench --threads "$THREADS" --quiet ${LIMIT:+--limit "$LIMIT"} \
    "${EST[@]}" "$@"; }

C=order=confidence
F=free_max=true,stop_at_first_miss=true
CHARGED=(mi-guided:gamma={0.1,0.15,0.2,0.3,0.6,1.0},$C mi-guided:gamma=0.6,lam=2,$C)
FREEMAX=(mi-guided:gamma=0.03,lam=1,$F,$C mi-guided:gamma=0.05,lam=1,$F,$C
         mi-guided:gamma=0.05,lam=0.3,$F,$C mi-guided:gamma={0.1,0.2,0.3,0.5},lam=1,$F,$C
         mi-guided:gamma=0.3,lam=2,$F,$C)
bench --set hard --samplers "${CHARGED[@]}" "${FREEMAX[@]}" --json "$OUT/hard.json" > "$OUT/hard.txt"
bench --set "$VAL" --samplers "${CHARGED[@]}" "${FREEMAX[@]}" --json "$OUT/val.json" > "$OUT/val.txt"
bench --set hard --remask-threshold 0.3 --samplers mi-guided:gamma={0.2,0.3},$C+corrector \
    --json "$OUT/corrector.json" > "$OUT/corrector.txt"
bench --set medium --samplers mi-guided:gamma={0.03,0.05,0.1,0.3,0.6},$C \
    mi-guided:gamma={0.03,0.1,0.3},lam=1,$F,$C --json "$OUT/medium.json" > "$OUT/medium.txt"
echo "MI-guided rows in $OUT"
