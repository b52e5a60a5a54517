#!/usr/bin/env bash
# Issue 37 (and 25 item 4): every GPU target in one command, each beside its baseline measured in the same run, for a
# session lent a GPU for a few minutes (the whole run <= 6 minutes of device time, each part under its own timeout).
#
#   bash benchmarks/gpu_checks.sh --stage                         # here, once: data (gzipped) + all-MiniLM-L6-v2
#                                                                 # (weights in fp16) into .gpu_checks/ (~52 MB)
#   # then the device tool: run(command='bash benchmarks/gpu_checks.sh > $OUT/gpu.txt 2>&1',
#   #                           carry=['.gpu_checks'], timeout_s=420)
#   nice -n 5 bash benchmarks/gpu_checks.sh --cpu-smoke           # here: the same steps at tiny sizes on CPU
#
# Parts and what each prints (targets of issue 37 on one H100/H200, bf16 bert-base):
#   training step, bf16, batch 64 x 32 and batch 256 x 64 (bench_train_step.py, issue 37 item 1's script): cl-bench's
#       step beside the plain PyTorch eager step of the same process (target >= 2.0x; MFU >= 10% / >= 30%), and the
#       sentence-transformers MNRL step where that script measures it;
#   evaluation (bench_suite_gpu.py): bf16 and fp32 encodings (fp32 = the baseline), the suite end to end with
#       eval.precision=auto and the classifiers where torch_classifier_device puts them (<= 15 s), an STS-B dev evaluation (<= 0.3 s), a sweep
#       job's set-up in one process (<= 2 s), a real model's STS in bf16/TF32 vs fp32 (the auto rule: bf16 while
#       every task is within 0.05), SentEval's classifier on the GPU vs the CPU kernel per task (within 0.1).
#   Each MET / NOT MET line is repeated under "=== summary ===" at the end of the evaluation part.
#
# Needs nothing from the network and installs nothing: data from $CL_BENCH_DATA (else .gpu_checks/data, unpacked
# from .gpu_checks/data.tgz on the first run, shared/data or ../shared/data), the tokenizer and the real model of
# all-MiniLM-L6-v2 from $CL_BENCH_MINILM (else models/ beside the data), the timed model a randomly initialised
# bert-base (BertConfig() defaults). Only the checkout (and what `carry` names, 64 MiB at most) reaches the GPU
# machine, not ../shared: hence --stage, with the data gzipped and the model's weights in fp16 (45 MB; the real-model
# comparison evaluates them in fp32 arithmetic). Python packages: the benchmarks import neither Hydra, OmegaConf nor
# MLflow (absent from the GPU image); torch, transformers, numba, scipy are there. Each part runs under `timeout`,
# and all parts share one budget ($GPU_CHECKS_BUDGET seconds, default 350; 900 with --cpu-smoke), so a hang cannot eat the device time;
# output is flushed line by line, so a part cut short still leaves what it printed.
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
  rm -rf "$DEST" && mkdir -p "$DEST/models/all-MiniLM-L6-v2" || exit 1
  tar czf "$DEST/data.tgz" -C "$SRC" sts transfer corpus/wiki1m_for_simcse.head.txt || exit 1
  for f in config.json tokenizer.json tokenizer_config.json special_tokens_map.json vocab.txt; do
    cp "$TOK/$f" "$DEST/models/all-MiniLM-L6-v2/" || exit 1
  done
  # the weights in fp16 (half the size; the carry limit is 64 MiB): a real model for the bf16-vs-fp32 STS check
  ${PYTHON:-python3} -c 'import sys
from safetensors.torch import load_file, save_file
weights = load_file(sys.argv[1])
save_file({k: v.half() if v.is_floating_point() else v for k, v in weights.items()}, sys.argv[2], metadata={"format": "pt"})
' "$TOK/model.safetensors" "$DEST/models/all-MiniLM-L6-v2/model.safetensors" || exit 1
  echo "staged $(du -sh "$DEST" | cut -f1) in $DEST from $SRC and $TOK; carry ['.gpu_checks']"
  exit 0
fi
if [ -f "$ROOT/.gpu_checks/data.tgz" ] && [ ! -d "$ROOT/.gpu_checks/data" ]; then  # the staged data, unpacked once
  mkdir -p "$ROOT/.gpu_checks/data" && tar xzf "$ROOT/.gpu_checks/data.tgz" -C "$ROOT/.gpu_checks/data" || exit 1
fi

export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}" HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONUNBUFFERED=1
PYTHON=${PYTHON:-python3}
DATA=$(first_dir "${CL_BENCH_DATA:-}" "$ROOT/.gpu_checks/data" "$ROOT/shared/data" "$ROOT/../shared/data" /work/shared/data)
MODEL=$(first_dir "${CL_BENCH_MINILM:-}" "$(dirname "$DATA")/models/all-MiniLM-L6-v2" "$ROOT/shared/models/all-MiniLM-L6-v2" \
                  "$ROOT/../shared/models/all-MiniLM-L6-v2" /work/shared/models/all-MiniLM-L6-v2)
export CL_BENCH_DATA=$DATA
BUDGET=${GPU_CHECKS_BUDGET:-$([ "$MODE" = gpu ] && echo 490 || echo 900)}  # cpu-smoke: a loaded CPU is slow
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
  # the compiled step compiles one graph per length bucket (first round, untimed); the large batch runs eager
  TRAIN_LARGE=(--batch-size 256 --max-length 64 --steps 15 --warmup 3 --compile off --no-mnrl)
  SUITE=(--transfer-config full --batch-size 128 --precision bf16 fp32)
  LIMITS=(170 60 250)
else
  DEVICE=cpu CONFIG=tiny THREADS=2
  TRAIN=(--batch-size 8 --max-length 16 --steps 2 --warmup 1 --peak-tokens 256)
  TRAIN_LARGE=(--batch-size 16 --max-length 16 --steps 2 --warmup 1 --peak-tokens 256)
  SUITE=(--transfer-config fast --batch-size 128 --sts-tasks sts12 --transfer-tasks trec --peak-tokens 256
         --precision bf16 fp32 --real-sts-tasks sts16 --dev-repeats 2 --no-geometry --real-model random)
  LIMITS=(150 150 600)
fi
COMMON=(--model "$MODEL" --random-config "$CONFIG" --device "$DEVICE" --threads "$THREADS")

run "training step, bf16" "${LIMITS[0]}" $PYTHON benchmarks/bench_train_step.py "${COMMON[@]}" "${TRAIN[@]}" --precision bf16
run "training step, bf16, large batch" "${LIMITS[1]}" $PYTHON benchmarks/bench_train_step.py "${COMMON[@]}" \
    "${TRAIN_LARGE[@]}" --precision bf16
run "evaluation suite" "${LIMITS[2]}" $PYTHON benchmarks/bench_suite_gpu.py "${COMMON[@]}" --data "$DATA" \
    --real-model "$MODEL" "${SUITE[@]}"
echo "=== gpu_checks.sh done in $(( $(date +%s) - START )) s ==="
