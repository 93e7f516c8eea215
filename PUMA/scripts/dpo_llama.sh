#!/usr/bin/env bash
# Step 6b: DPO with LoRA on the merged SFT model (beta 0.1, lr 5e-5, 5 epochs) with accelerate.
set -euo pipefail
source "$(dirname "$0")/launch_env.sh"
exec "${LAUNCH[@]}" -m PUMA.dpo --recipe "$RECIPE" --model_path "${MODEL_PATH:-PUMA/output/sft_merged}" \
  --data_file "${PUMA_DATA:-PUMA/data}/dpo_train.json" --output_dir "${OUTPUT_DIR:-PUMA/output/dpo}" \
  "${TRAIN_ARGS[@]}" "$@"
