#!/usr/bin/env bash
# The Sudoku MI estimator for one Sudoku MDM, end to end and reproducible:
#   1. ground-truth labels by perturbation probing   (unmask mi label)
#   2. training on the frozen MDM's hidden states    (unmask mi train)
#   3. held-out evaluation and cost                  (unmask mi eval)
#   4. an MI map of a hard puzzle, both sources      (unmask mi map)
#   5. shipping into src/unmask/pretrained/sudoku_mi_estimator/ (shipped model only)
#
# Usage: scripts/train_sudoku_estimator.sh [MODEL] [WORK]
#   MODEL  model folder or shipped name (default: sudoku, the shipped MDM)
#   WORK   scratch folder (default: runs/mi_estimator); labels and runs are kept per model
#          fingerprint, so a rerun resumes and a new model starts fresh
# Environment:
#   CONTEXTS  labelled contexts (default 8192, the shipped estimator's; 10% are held out)
#   EPS       probing: skip tokens with p < EPS (default 1e-4)
#   THREADS   torch CPU threads (default: all)
#   SHIP      auto (default: ship only when MODEL is the shipped model), 1 (always), 0 (never)
set -euo pipefail

MODEL=${1:-sudoku}
WORK=${2:-runs/mi_estimator}
CONTEXTS=${CONTEXTS:-8192}
EPS=${EPS:-1e-3}
THREADS=${THREADS:-$(nproc)}
SHIP=${SHIP:-auto}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PY=${PYTHON:-$ROOT/.venv/bin/python}
export PYTHONPATH=$ROOT/src${PYTHONPATH:+:$PYTHONPATH}
unmask() { "$PY" -m unmask "$@"; }
stamp() { date +%s; }

FP=$("$PY" -c "import sys; from unmask.models.auto import load_model; \
print(load_model(sys.argv[1]).fingerprint())" "$MODEL")
SHIPPED_FP=$("$PY" -c "from unmask.models.auto import load_model; \
print(load_model().fingerprint())" 2>/dev/null || echo none)
LABELS=$WORK/labels-$FP
RUN=$WORK/estimator-$FP
mkdir -p "$WORK"
echo "model $MODEL (fingerprint $FP); work folder $WORK; $CONTEXTS contexts, eps $EPS"

t0=$(stamp)
unmask mi label --model "$MODEL" --contexts "$CONTEXTS" --eps "$EPS" --out "$LABELS" \
    --threads "$THREADS" --batch-size 2048
t1=$(stamp)

RESUME=()
[[ -f $RUN/checkpoint.pt ]] && RESUME=(--resume)
unmask mi train --model "$MODEL" --labels "$LABELS" --out "$RUN" \
    --threads "$THREADS" --pair-prior --augment 4 --max-time 2100 "${RESUME[@]}"
t2=$(stamp)

unmask mi eval --model "$MODEL" --labels "$LABELS" --estimator "$RUN/best" \
    --threads "$THREADS" --json > "$RUN/eval.json"
unmask mi eval --model "$MODEL" --labels "$LABELS" --estimator "$RUN/best" \
    --threads "$THREADS" | tee "$RUN/eval.txt"
t3=$(stamp)

PUZZLE=$(awk '!/^#/ {print $1; exit}' "$ROOT/src/unmask/sudoku/data/hard.txt")
unmask mi map "$PUZZLE" --model "$MODEL" --estimator "$RUN/best" --source gt,estimator \
    --out "$RUN/map.png"
t4=$(stamp)

"$PY" - "$RUN/eval.json" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
checks = [("Spearman", r["spearman"], ">=", 0.9), ("top-decile recall",
          r["top_decile_recall"], ">=", 0.8), ("cost fraction", r["cost"]["fraction"], "<=", 0.1)]
for name, value, op, target in checks:
    ok = value >= target if op == ">=" else value <= target
    print(f"target {name} {op} {target}: {value:.3f} {'met' if ok else 'NOT met'}")
EOF

if [[ $SHIP == 1 || ( $SHIP == auto && $FP == "$SHIPPED_FP" ) ]]; then
    DEST=$ROOT/src/unmask/pretrained/sudoku_mi_estimator
    mkdir -p "$DEST"
    cp "$RUN/best/config.json" "$RUN/best/estimator.safetensors" "$RUN/eval.json" "$DEST/"
    echo "shipped into $DEST"
else
    echo "not shipped: $MODEL is not the shipped model (fingerprint $SHIPPED_FP); SHIP=1 forces"
fi
echo "timing: labels $((t1 - t0)) s, training $((t2 - t1)) s, evaluation $((t3 - t2)) s," \
     "map $((t4 - t3)) s, total $((t4 - t0)) s"
