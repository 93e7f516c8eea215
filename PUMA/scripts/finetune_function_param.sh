#!/usr/bin/env bash
# Step 2: LoRA SFT (TRAIN_ON=function|param|function_param) on the GPUs there are.
#   RECIPE=release MODEL_PATH=meta-llama/Llama-2-7b-chat-hf bash PUMA/scripts/finetune_function_param.sh
# The batch is PUMA.sft's (release: 64 examples per optimizer step on any GPU count, batch 1 per GPU;
# improved: 4 packed examples x accumulation 4 per GPU); extra flags (e.g. --global_batch_size) pass through.
# RECIPE=release on GPUs runs DeepSpeed ZeRO-2 in fp16 as the release (DEEPSPEED=none: AMP fp16). GPUS,
# PRECISION, DEEPSPEED and PUMA_PYTHON choose the launch: python -m PUMA.launch --help.
# NNODES, NODE_RANK, MASTER_ADDR and MASTER_PORT run it over several machines (started on each), CPU_PROCESSES=N
# on N CPU processes (a check), FSDP=fsdp2 or DEEPSPEED=zero3 shards a model too large for one GPU.
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=python
[ -x .venv/bin/python ] && PY=.venv/bin/python
exec "$PY" -m PUMA.launch sft -- --recipe "${RECIPE:-release}" --model_path "${MODEL_PATH:-meta-llama/Llama-2-7b-chat-hf}" \
  --train_on "${TRAIN_ON:-function_param}" --function_data "${PUMA_DATA:-PUMA/data}/function_train.json" \
  --param_data "${PUMA_DATA:-PUMA/data}/param_train.json" --out "${OUTPUT_DIR:-PUMA/output/sft}" "$@"
