# Sourced by the training scripts. Sets the repo root as working directory and:
#   PY         the Python to use
#   RECIPE     release (default) or improved (PUMA/recipe.py)
#   N          GPUs used: those in GPUS or CUDA_VISIBLE_DEVICES when set, else every GPU nvidia-smi lists
#   LAUNCH     the command that starts a module: accelerate on 1..N GPUs, plain Python without a GPU
#   TRAIN_ARGS the recipe's GPU precision (release fp16, improved bf16; PRECISION=bf16|fp16|fp32 overrides)
#              and DEEPSPEED=zero2|zero3 (pip install -r requirements-gpu.txt first)
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
PY=python
[ -x .venv/bin/python ] && PY=.venv/bin/python
RECIPE="${RECIPE:-release}"
case "$RECIPE" in release|improved) ;; *) echo "RECIPE=$RECIPE: expected release or improved" >&2; exit 2 ;; esac
if [ -n "${GPUS:-}" ]; then
  export CUDA_VISIBLE_DEVICES="$GPUS"
fi
if [ -n "${CUDA_VISIBLE_DEVICES+set}" ]; then
  N=$(echo "$CUDA_VISIBLE_DEVICES" | tr ',' '\n' | grep -c . || true)
elif command -v nvidia-smi >/dev/null 2>&1; then
  N=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
else
  N=0
fi
if [ "$N" -gt 1 ]; then
  LAUNCH=("$PY" -m accelerate.commands.launch --config_file PUMA/configs/accelerate_multi_gpu.yaml --num_processes "$N")
elif [ "$N" -eq 1 ]; then
  LAUNCH=("$PY" -m accelerate.commands.launch --config_file PUMA/configs/accelerate_single_gpu.yaml --num_processes 1)
else
  LAUNCH=("$PY")
fi
if [ "$N" -eq 0 ]; then
  default_precision=fp32
elif [ "$RECIPE" = release ]; then
  default_precision=fp16
else
  default_precision=bf16
fi
case "${PRECISION:-$default_precision}" in
  bf16) TRAIN_ARGS=(--bf16) ;;
  fp16) TRAIN_ARGS=(--fp16) ;;
  fp32) TRAIN_ARGS=() ;;
  *) echo "PRECISION=${PRECISION}: expected bf16, fp16 or fp32" >&2; exit 2 ;;
esac
case "${DEEPSPEED:-none}" in
  none) ;;
  zero2|zero3) TRAIN_ARGS+=(--deepspeed "PUMA/configs/deepspeed_${DEEPSPEED}.json") ;;
  *) echo "DEEPSPEED=${DEEPSPEED}: expected zero2, zero3 or none" >&2; exit 2 ;;
esac
echo "PUMA launch: recipe $RECIPE, $N GPU(s), ${LAUNCH[*]:0:3}... ${TRAIN_ARGS[*]:-fp32}" >&2
