#!/usr/bin/env bash
# Audit a model behind any OpenAI-compatible endpoint (OpenAI, vLLM, Ollama, LM Studio).
#
#   OpenAI:    MODEL=openai:gpt-4o-mini BASE_URL=https://api.openai.com/v1 OPENAI_API_KEY=... bash examples/audit_endpoint.sh
#   vLLM:      MODEL=openai:Qwen/Qwen2.5-VL-7B-Instruct BASE_URL=http://127.0.0.1:8000/v1 OPENAI_API_KEY=EMPTY bash examples/audit_endpoint.sh
#   Ollama:    MODEL=openai:llava:13b BASE_URL=http://127.0.0.1:11434/v1 OPENAI_API_KEY=ollama bash examples/audit_endpoint.sh
#
# The key is read from the environment variable named by --api-key-env (default OPENAI_API_KEY);
# it is never written to the run folder. Rerunning the script resumes where it stopped.
set -euo pipefail
MODEL=${MODEL:?set MODEL, e.g. openai:gpt-4o-mini}
BASE_URL=${BASE_URL:?set BASE_URL, e.g. http://127.0.0.1:8000/v1}
OUT=${OUT:-audit-example}
MODALITY=${MODALITY:-image}   # image, text or both
RUN="$OUT/runs/$(echo "$MODEL" | tr -c 'A-Za-z0-9._-\n' '-')"

ecgtrace synth --out "$OUT/record" --hours 2 --seed 1
ecgtrace build "$OUT/record/holter" --out "$OUT/dataset" --seed 1
ecgtrace audit "$OUT/dataset/audit.jsonl" --model "$MODEL" --base-url "$BASE_URL" \
  --modality "$MODALITY" --mode teacher --concurrency 8 --timeout 120 --run "$RUN"
ecgtrace qa-eval "$OUT/dataset/qa.jsonl" --model "$MODEL" --base-url "$BASE_URL" \
  --modality "$MODALITY" --concurrency 8 --skip-unavailable --run "$RUN-qa"
ecgtrace report "$RUN"
ecgtrace report "$RUN-qa"
echo "reports: $RUN/report.html $RUN-qa/report.html"
