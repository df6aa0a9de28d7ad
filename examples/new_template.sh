#!/usr/bin/env bash
# Write, validate and preview a new QA template, then build a dataset with it: no Python needed.
# The template is examples/templates/closed_count_couplets.yaml; copy it and edit the stems,
# the window length, the event kinds or the distractor rule.
set -euo pipefail
OUT=${OUT:-template-example}
HERE=$(cd "$(dirname "$0")" && pwd)

ecgtrace templates validate "$HERE/templates/closed_count_couplets.yaml"
ecgtrace synth --out "$OUT/record" --hours 1 --seed 2
ecgtrace templates preview "$HERE/templates/closed_count_couplets.yaml" --record "$OUT/record/holter"
# --templates replaces the built-in set with the folder's templates
ecgtrace build "$OUT/record/holter" --out "$OUT/dataset" --templates "$HERE/templates" --no-audit
head -c 600 "$OUT/dataset/qa.jsonl"; echo
