#!/usr/bin/env bash
# Steps 3-6 by online RL instead: GRPO with LoRA on the merged SFT model, reward = the benchmark's
# Result Acc of each sampled parameter (scored on DATA_DIR's train split), with accelerate.
# Generation runs in vLLM inside TRL when vllm is installed and a GPU is visible (else HF generate):
#   GENERATION=hf|vllm|auto (default auto); VLLM_MODE=colocate (default, in the training processes)
#   or server (start `trl vllm-serve --model PUMA/output/sft_merged` on a GPU of its own first, and
#   give the training processes the other GPUs with GPUS=...; VLLM_URL, default http://localhost:8000).
# Evaluate the adapter with step 7: run.py --agent_strategy puma --puma_generate 1 --puma_model_path OUTPUT_DIR
# GPUS, PRECISION (default: RECIPE's GPU precision), DEEPSPEED (default none) and PUMA_PYTHON choose the
# launch: python -m PUMA.launch --help.
# NNODES, NODE_RANK, MASTER_ADDR and MASTER_PORT run it over several machines (started on each), CPU_PROCESSES=N
# on N CPU processes (a check), FSDP=fsdp2 or DEEPSPEED=zero3 shards a model too large for one GPU.
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=python
[ -x .venv/bin/python ] && PY=.venv/bin/python
server=()
[ "${VLLM_MODE:-colocate}" = server ] && server=(--vllm_server_base_url "${VLLM_URL:-http://localhost:8000}")
exec "$PY" -m PUMA.launch grpo -- --model_path "${MODEL_PATH:-PUMA/output/sft_merged}" --data_file "${PUMA_DATA:-PUMA/data}/param_train.json" \
  ${DATA_DIR:+--data_dir "$DATA_DIR"} --out "${OUTPUT_DIR:-PUMA/output/grpo}" \
  --generation_backend "${GENERATION:-auto}" --vllm_mode "${VLLM_MODE:-colocate}" "${server[@]}" "$@"
