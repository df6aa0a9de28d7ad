#!/usr/bin/env bash
# Compare two examinees on the same audit items with McNemar's test.
# Here the built-in baselines: `random` (chance) and `prior` (sees only the question text).
# Replace them with two real models (openai:<name> plus --base-url) to compare models.
set -euo pipefail
OUT=${OUT:-compare-example}
A=${A:-random}
B=${B:-prior}

ecgtrace synth --out "$OUT/record" --hours 1 --seed 3
ecgtrace build "$OUT/record/holter" --out "$OUT/dataset" --seed 3
ecgtrace audit "$OUT/dataset/audit.jsonl" --model "$A" --modality text --run "$OUT/runs/$A" --quiet
ecgtrace audit "$OUT/dataset/audit.jsonl" --model "$B" --modality text --run "$OUT/runs/$B" --quiet
ecgtrace compare "$OUT/runs/$A" "$OUT/runs/$B"
