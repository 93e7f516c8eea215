#!/usr/bin/env bash
# Step 2: LoRA SFT (TRAIN_ON=function|param|function_param) with accelerate on the GPUs there are.
#   RECIPE=release MODEL_PATH=meta-llama/Llama-2-7b-chat-hf bash PUMA/scripts/finetune_function_param.sh
# RECIPE=improved packs each micro-batch of 4 examples (x 4 accumulation: the release's 16 per step).
set -euo pipefail
source "$(dirname "$0")/launch_env.sh"
batch=()
[ "$RECIPE" = improved ] && batch=(--per_device_train_batch_size 4 --gradient_accumulation_steps 4)
exec "${LAUNCH[@]}" -m PUMA.sft --recipe "$RECIPE" --model_path "${MODEL_PATH:-meta-llama/Llama-2-7b-chat-hf}" \
  --train_on "${TRAIN_ON:-function_param}" --function_data "${PUMA_DATA:-PUMA/data}/function_train.json" \
  --param_data "${PUMA_DATA:-PUMA/data}/param_train.json" --output_dir "${OUTPUT_DIR:-PUMA/output/sft}" \
  "${batch[@]}" "${TRAIN_ARGS[@]}" "$@"
