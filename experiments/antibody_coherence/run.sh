#!/usr/bin/env bash
# The coherence study: unconditional AntiBERTy chains of 118 residues at T=1, chain i with
# seed SEED + i; one JSON per sampler (skipped when present), then typing and PLL.
set -euo pipefail
cd "$(dirname "$0")/../.."
export OMP_NUM_THREADS=1 PYTHONPATH=$PWD/src
PY=${PY:-python}
R=experiments/antibody_coherence/results
$PY experiments/antibody_coherence/decode_runs.py --out $R/base_118_T1 \
    confidence topk:k=4 eb:gamma=1 eb:gamma=1.5 mi-guided:estimator=antiberty \
    "topk:k=118+ramp=0.25" "topk:k=118+ramp=0.15" "eb:gamma=1.5+ramp=0.25" \
    "eb:gamma=3+ramp=0.25" "eb:gamma=2+ramp=0.35" \
    "topk:k=128+ramp=0.03,budget=entropy" "topk:k=128+ramp=0.06,budget=entropy"
$PY experiments/antibody_coherence/decode_runs.py --out $R/seed16_118_T1 --seed 16 \
    "topk:k=118+ramp=0.25" eb:gamma=1.5 confidence
# the oracle: ground-truth pairwise MI by probing, on the first 4 chains (seeds 0-3)
$PY experiments/antibody_coherence/decode_runs.py --out $R/oracle_118_T1 --chains 4 \
    "mi-oracle:gamma=2,free_max=true,stop_at_first_miss=true"
for d in base_118_T1 seed16_118_T1 oracle_118_T1; do
    $PY experiments/antibody_coherence/score_runs.py $R/$d --positions 24
done
