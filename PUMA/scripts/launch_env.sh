# Sourced by the training scripts. Sets the repo root as working directory and:
#   PY         the Python to use (.venv's when there is one; PUMA_PYTHON overrides)
#   RECIPE     release (default) or improved (PUMA/recipe.py)
#   N          GPUs used: those in GPUS or CUDA_VISIBLE_DEVICES when set, else every GPU nvidia-smi lists
#   LAUNCH     the command that starts a module: torchrun with DeepSpeed, else accelerate on 1..N GPUs,
#              plain Python without a GPU
#   TRAIN_ARGS the recipe's GPU precision (release fp16, improved bf16; PRECISION=bf16|fp16|fp32 overrides)
#              and its DeepSpeed config. DEEPSPEED=release|zero2|zero3|none; the default is `release`
#              (PUMA/configs/deepspeed_zero2_release.json, the release's ZeRO-2 fp16 settings) for the SFT and
#              DPO steps (the script sets PUMA_STEP=sft|dpo) under RECIPE=release on GPUs, else none.
#              DEEPSPEED=none under RECIPE=release trains with AMP fp16 instead; the step records that as a
#              departure from the release. The batch is the step's own (python -m PUMA.sft --help).
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
PY=python
[ -x .venv/bin/python ] && PY=.venv/bin/python
PY="${PUMA_PYTHON:-$PY}"
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
default_deepspeed=none
if [ "$RECIPE" = release ] && [ "$N" -gt 0 ]; then
  case "${PUMA_STEP:-}" in sft|dpo) default_deepspeed=release ;; esac
fi
case "${DEEPSPEED:-$default_deepspeed}" in
  none) ;;
  release) TRAIN_ARGS+=(--deepspeed PUMA/configs/deepspeed_zero2_release.json) ;;
  zero2|zero3) TRAIN_ARGS+=(--deepspeed "PUMA/configs/deepspeed_${DEEPSPEED}.json") ;;
  *) echo "DEEPSPEED=${DEEPSPEED}: expected release, zero2, zero3 or none" >&2; exit 2 ;;
esac
if [ -z "${DEEPSPEED:-}" ] && [ "$default_deepspeed" = release ] &&
   ! "$PY" -c 'import importlib.util, sys; sys.exit(importlib.util.find_spec("deepspeed") is None)' 2>/dev/null; then
  echo "RECIPE=release trains as the release did, with DeepSpeed ZeRO-2 in fp16, and the deepspeed package is" \
       "not installed: pip install -r requirements-gpu.txt, or set DEEPSPEED=none to train with AMP fp16 instead" \
       "(the step's record then lists it as a departure from the release)" >&2
  exit 3
fi
if [ "$N" -gt 0 ] && [ "${DEEPSPEED:-$default_deepspeed}" != none ]; then
  # DeepSpeed needs the rank variables even for one process: torchrun sets them (as the release's `deepspeed` launcher)
  LAUNCH=("$PY" -m torch.distributed.run --standalone --nproc_per_node "$N")
elif [ "$N" -gt 1 ]; then
  LAUNCH=("$PY" -m accelerate.commands.launch --config_file PUMA/configs/accelerate_multi_gpu.yaml --num_processes "$N")
elif [ "$N" -eq 1 ]; then
  LAUNCH=("$PY" -m accelerate.commands.launch --config_file PUMA/configs/accelerate_single_gpu.yaml --num_processes 1)
else
  LAUNCH=("$PY")
fi
echo "PUMA launch: recipe $RECIPE, $N GPU(s), ${LAUNCH[*]:0:3}... ${TRAIN_ARGS[*]:-fp32}" >&2
