# Sourced by the training scripts: the repo root as working directory, the Python to use,
# and the GPUs (GPUS=0,1,2,3 or CUDA_VISIBLE_DEVICES) with their count for accelerate.
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
PY=python
[ -x .venv/bin/python ] && PY=.venv/bin/python
export CUDA_VISIBLE_DEVICES="${GPUS:-${CUDA_VISIBLE_DEVICES:-0,1,2,3}}"
N=$(echo "$CUDA_VISIBLE_DEVICES" | tr ',' '\n' | grep -c .)
