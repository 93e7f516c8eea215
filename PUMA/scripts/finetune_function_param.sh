#!/usr/bin/env bash
# Step 2: LoRA SFT on function_param (TRAIN_ON=function|param|function_param) with accelerate.
#   GPUS=0,1,2,3 MODEL_PATH=meta-llama/Llama-2-7b-chat-hf bash PUMA/scripts/finetune_function_param.sh
set -euo pipefail
source "$(dirname "$0")/launch_env.sh"
exec "$PY" -m accelerate.commands.launch --config_file PUMA/configs/accelerate_multi_gpu.yaml --num_processes "$N" \
  -m PUMA.sft --model_path "${MODEL_PATH:-meta-llama/Llama-2-7b-chat-hf}" --train_on "${TRAIN_ON:-function_param}" \
  --function_data "${PUMA_DATA:-PUMA/data}/function_train.json" --param_data "${PUMA_DATA:-PUMA/data}/param_train.json" \
  --output_dir "${OUTPUT_DIR:-PUMA/output/sft}" --bf16 "$@"
