#!/usr/bin/env bash
# A stronger Sudoku MDM on a lent GPU, as one prepared run (about 10 minutes of device time):
#   1. train a deeper, wider MDM from scratch; the learning-rate schedule ends with the time
#      budget, whatever the machine's speed                  (unmask sudoku train --decay-by-time)
#   2. all 1,000 hard puzzles: sequential, threshold, EB      (unmask sudoku bench --device)
#   3. ground-truth MI labels for its estimator               (unmask mi label --device)
# Everything lands under OUT: model/best (the weights), train.log, bench.json, bench.log and
# mi/labels-FINGERPRINT. Back on the CPU machine, with OUT's files copied to runs/gpu:
#   CONTEXTS=2048 scripts/train_sudoku_estimator.sh runs/gpu/model/best runs/gpu/mi
# finds the labels complete, trains and evaluates the estimator; then
#   unmask sudoku bench --model runs/gpu/model/best --estimator runs/gpu/mi/estimator-FP/best
# gives the MI-guided rows.
#
# Usage (on the device machine, from the repository root): OUT=DIR scripts/gpu_sudoku.sh
# (carry runs/sudoku/cache to save generating the training pool there).
# Environment (defaults in brackets):
#   OUT       output folder (required; the device tool provides $OUT)
#   DEVICE    torch device [cuda]
#   TRAIN_S   training seconds [420]
#   CONFIG    architecture overrides, JSON [16 blocks, d=192, 6 heads, d_ff=768: 7.1M parameters]
#   BATCH     batch size [512];  LR  peak learning rate [1e-3];  WARMUP  warm-up steps [500]
#   STEPS     step cap [200000] (the time budget normally ends the run first)
#   POOL      generated training puzzles [100000]; the CPU machine's cached pool (seed 0) is
#             reused when runs/sudoku/cache holds it
#   LIMIT     hard puzzles benchmarked [1000];  CONTEXTS  labelled contexts [2048]
#   PYTHON    interpreter [python3]
set -euo pipefail

OUT=${OUT:?set OUT to the output folder}
DEVICE=${DEVICE:-cuda}
TRAIN_S=${TRAIN_S:-420}
CONFIG=${CONFIG:-'{"n_layers": 16, "d_model": 192, "n_heads": 6, "d_ff": 768}'}
BATCH=${BATCH:-512}
LR=${LR:-1e-3}
WARMUP=${WARMUP:-500}
STEPS=${STEPS:-200000}
POOL=${POOL:-100000}
LIMIT=${LIMIT:-1000}
CONTEXTS=${CONTEXTS:-2048}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PY=${PYTHON:-python3}
export PYTHONPATH=$ROOT/src${PYTHONPATH:+:$PYTHONPATH}
export COLUMNS=${COLUMNS:-160}  # tables in the logs are not cut to a narrow terminal
unmask() { "$PY" -m unmask "$@"; }
stamp() { date +%s; }

RUN=$OUT/model
mkdir -p "$RUN/cache"
POOL_FILE=sudoku-pool-$POOL-1000.npz  # sudoku train's cache name for --seed 0
if [[ -f $ROOT/runs/sudoku/cache/$POOL_FILE && ! -f $RUN/cache/$POOL_FILE ]]; then
    cp "$ROOT/runs/sudoku/cache/$POOL_FILE" "$RUN/cache/"
fi
"$PY" -c "import torch; print('torch', torch.__version__, 'cuda', torch.cuda.is_available())"

t0=$(stamp)
# --overwrite: RUN holds the pool copied in above, which this command did not write
unmask sudoku train --device "$DEVICE" --out "$RUN" --overwrite --model-config "$CONFIG" \
    --steps "$STEPS" --batch-size "$BATCH" --lr "$LR" --warmup "$WARMUP" --eval-every 2000 \
    --max-time "$TRAIN_S" --decay-by-time --pool "$POOL" 2>&1 | tee "$OUT/train.log"
t1=$(stamp)

unmask sudoku bench --device "$DEVICE" --model "$RUN/best" --limit "$LIMIT" --quiet \
    --json "$OUT/bench.json" --samplers confidence threshold:tau=0.999 \
    eb:gamma=0.1,order=confidence eb:gamma=0.3,order=confidence topk:k=7 \
    2>&1 | tee "$OUT/bench.log"
t2=$(stamp)

FP=$("$PY" -c "import sys; from unmask.models.auto import load_model; \
print(load_model(sys.argv[1]).fingerprint())" "$RUN/best")
unmask mi label --device "$DEVICE" --model "$RUN/best" --contexts "$CONTEXTS" --eps 1e-3 \
    --out "$OUT/mi/labels-$FP" --batch-size 8192 2>&1 | tee "$OUT/labels.log"
t3=$(stamp)
# only what comes back is kept: the optimiser checkpoint and the puzzle pool are not needed
rm -rf "$RUN/checkpoint.pt" "$RUN/cache"
echo "model fingerprint $FP"
echo "timing: training $((t1 - t0)) s, bench $((t2 - t1)) s, labels $((t3 - t2)) s"
