#!/usr/bin/env bash
# Step 6b: DPO with LoRA on the merged SFT model (beta 0.1, lr 5e-5, 5 epochs) with accelerate.
set -euo pipefail
source "$(dirname "$0")/launch_env.sh"
exec "$PY" -m accelerate.commands.launch --config_file PUMA/configs/accelerate_multi_gpu.yaml --num_processes "$N" \
  -m PUMA.dpo --model_path "${MODEL_PATH:-PUMA/output/sft_merged}" --data_file "${PUMA_DATA:-PUMA/data}/dpo_train.json" \
  --output_dir "${OUTPUT_DIR:-PUMA/output/dpo}" --bf16 "$@"
