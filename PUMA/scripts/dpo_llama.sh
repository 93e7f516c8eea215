#!/usr/bin/env bash
# Step 6b: DPO with LoRA on the merged SFT model (beta 0.1, lr 5e-5, 5 epochs) on the GPUs there are.
# The batch is PUMA.dpo's (release: 64 pairs per optimizer step on any GPU count; improved: 1 x 16 per GPU).
# RECIPE=release on GPUs runs DeepSpeed ZeRO-2 in fp16 as the release (DEEPSPEED=none: AMP fp16). GPUS,
# PRECISION, DEEPSPEED and PUMA_PYTHON choose the launch: python -m PUMA.launch --help.
# NNODES, NODE_RANK, MASTER_ADDR and MASTER_PORT run it over several machines (started on each), CPU_PROCESSES=N
# on N CPU processes (a check), FSDP=fsdp2 or DEEPSPEED=zero3 shards a model too large for one GPU.
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=python
[ -x .venv/bin/python ] && PY=.venv/bin/python
exec "$PY" -m PUMA.launch dpo -- --recipe "${RECIPE:-release}" --model_path "${MODEL_PATH:-PUMA/output/sft_merged}" \
  --data_file "${PUMA_DATA:-PUMA/data}/dpo_train.json" --out "${OUTPUT_DIR:-PUMA/output/dpo}" "$@"
