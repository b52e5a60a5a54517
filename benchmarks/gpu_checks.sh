#!/usr/bin/env bash
# Issue 25 item 4: every GPU figure in one command, for a session lent a GPU for a few minutes.
#
#   bash benchmarks/gpu_checks.sh --stage                         # here, once: data + tokenizer into .gpu_checks/ (~20 MB)
#   # then the device tool: run(command='bash benchmarks/gpu_checks.sh > $OUT/gpu.txt 2>&1',
#   #                           carry=['.gpu_checks'], timeout_s=600)
#   nice -n 5 bash benchmarks/gpu_checks.sh --cpu-smoke           # here: the same steps at tiny sizes on CPU
#
# Needs nothing from the network and installs nothing: data from $CL_BENCH_DATA (else .gpu_checks/data,
# shared/data or ../shared/data), the tokenizer of all-MiniLM-L6-v2 from $CL_BENCH_MINILM (else models/ beside
# the data), the model a randomly initialised bert-base (BertConfig() defaults). Only the checkout (and what
# `carry` names) reaches the GPU machine, not ../shared: hence --stage. Python packages: the benchmarks import
# neither Hydra, OmegaConf nor MLflow (absent from the GPU image); torch, transformers, numba, scipy are there. Each part runs
# under `timeout`, and all parts share one budget ($GPU_CHECKS_BUDGET seconds, default 540), so a hang cannot
# eat the device time; output is flushed line by line, so a part cut short still leaves what it printed.
# Order: the cheapest and most important first: the bf16 then fp32 training step, then the suite in one
# process (bf16 and fp32 encodings, then the bf16 classifiers, then the fp32 ones: the CPU-bound part last).
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
MODE=gpu
[ "${1:-}" = "--cpu-smoke" ] && MODE=cpu-smoke
first_dir() { for d in "$@"; do [ -n "$d" ] && [ -d "$d" ] && { echo "$d"; return; }; done; echo "${1:-}"; }

if [ "${1:-}" = "--stage" ]; then  # copy what the GPU run reads into the checkout (ignored by git), to be carried
  SRC=$(first_dir "${CL_BENCH_DATA:-}" "$ROOT/shared/data" "$ROOT/../shared/data" /work/shared/data)
  TOK=$(first_dir "${CL_BENCH_MINILM:-}" "$(dirname "$SRC")/models/all-MiniLM-L6-v2")
  DEST=$ROOT/.gpu_checks
  rm -rf "$DEST" && mkdir -p "$DEST/data/corpus" "$DEST/models/all-MiniLM-L6-v2" || exit 1
  cp -r "$SRC/sts" "$SRC/transfer" "$DEST/data/" && cp "$SRC/corpus/wiki1m_for_simcse.head.txt" "$DEST/data/corpus/" || exit 1
  for f in config.json tokenizer.json tokenizer_config.json special_tokens_map.json vocab.txt; do  # no weights
    cp "$TOK/$f" "$DEST/models/all-MiniLM-L6-v2/" || exit 1
  done
  echo "staged $(du -sh "$DEST" | cut -f1) in $DEST from $SRC and $TOK; carry ['.gpu_checks']"
  exit 0
fi

export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}" HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONUNBUFFERED=1
PYTHON=${PYTHON:-python3}
DATA=$(first_dir "${CL_BENCH_DATA:-}" "$ROOT/.gpu_checks/data" "$ROOT/shared/data" "$ROOT/../shared/data" /work/shared/data)
MODEL=$(first_dir "${CL_BENCH_MINILM:-}" "$(dirname "$DATA")/models/all-MiniLM-L6-v2" "$ROOT/shared/models/all-MiniLM-L6-v2" \
                  "$ROOT/../shared/models/all-MiniLM-L6-v2" /work/shared/models/all-MiniLM-L6-v2)
export CL_BENCH_DATA=$DATA
BUDGET=${GPU_CHECKS_BUDGET:-540}
START=$(date +%s)

# run NAME LIMIT_S COMMAND...: the command under `timeout` (its own limit, cut to what the budget leaves)
run() {
  local name=$1 limit=$2; shift 2
  local left=$(( BUDGET - ($(date +%s) - START) ))
  (( limit > left - 5 )) && limit=$(( left - 5 ))
  echo "=== $name (limit ${limit} s; budget left ${left} s) ==="
  if (( limit < 15 )); then echo "=== $name: SKIPPED, the budget is spent ==="; return; fi
  local t0; t0=$(date +%s%N)
  timeout -k 10 "$limit" "$@"
  local rc=$?
  local ms=$(( ($(date +%s%N) - t0) / 1000000 ))
  [ $rc -eq 124 ] && echo "=== $name: TIMED OUT after ${limit} s ==="
  printf '=== %s: exit %d, %d.%d s wall ===\n' "$name" "$rc" $(( ms / 1000 )) $(( ms % 1000 / 100 ))
}

echo "=== gpu_checks.sh mode=$MODE at $(date -u +%FT%TZ); commit $(git rev-parse --short HEAD 2>/dev/null || echo '?') ==="
echo "data: $DATA"; echo "tokenizer: $MODEL"; echo "cores: $(nproc)"
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit \
  --format=csv 2>&1
$PYTHON - <<'EOF'
import torch, transformers
print(f"torch {torch.__version__}, CUDA {torch.version.cuda}, transformers {transformers.__version__}, "
      f"cuda available {torch.cuda.is_available()}"
      + (f", {torch.cuda.get_device_name(0)}, bf16 {torch.cuda.is_bf16_supported()}" if torch.cuda.is_available() else ""))
EOF
[ -d "$DATA/sts" ] && [ -d "$DATA/transfer" ] || echo "WARNING: no sts/ and transfer/ under $DATA: the suite parts will fail"
[ -f "$MODEL/vocab.txt" ] || echo "WARNING: no tokenizer at $MODEL"

THREADS=$(nproc)
if [ "$MODE" = gpu ]; then
  DEVICE=cuda CONFIG=bert-base
  TRAIN=(--batch-size 64 --max-length 32 --steps 30 --warmup 5)
  SUITE=(--transfer-config full --batch-size 128)
  LIMITS=(150 100 400)
else
  DEVICE=cpu CONFIG=tiny THREADS=2
  TRAIN=(--batch-size 8 --max-length 16 --steps 2 --warmup 1 --peak-tokens 256)
  SUITE=(--transfer-config fast --batch-size 128 --sts-tasks sts12 --transfer-tasks trec --peak-tokens 256)
  LIMITS=(120 120 240)
fi
COMMON=(--model "$MODEL" --random-config "$CONFIG" --device "$DEVICE" --threads "$THREADS")

run "training step, bf16" "${LIMITS[0]}" $PYTHON benchmarks/bench_train_step.py "${COMMON[@]}" "${TRAIN[@]}" --precision bf16
run "training step, fp32" "${LIMITS[1]}" $PYTHON benchmarks/bench_train_step.py "${COMMON[@]}" "${TRAIN[@]}" --precision fp32
run "evaluation suite, bf16 and fp32" "${LIMITS[2]}" $PYTHON benchmarks/bench_suite_gpu.py "${COMMON[@]}" --data "$DATA" \
    "${SUITE[@]}" --precision bf16 fp32
echo "=== gpu_checks.sh done in $(( $(date +%s) - START )) s ==="
