#!/usr/bin/env bash
# PUMA with online RL on CPU in a few minutes: tiny synthetic data, a tiny random Llama with a
# locally trained tokenizer, SFT (steps 1-2), then GRPO on the benchmark's Result Acc instead of
# steps 3-6, and step 7 with the GRPO adapter generating live. The scores mean nothing; the run
# shows the mean reward of every GRPO step and ends with a validated result file.
#   bash scripts/grpo_smoke.sh [WORK_DIR]        # default data/grpo_smoke
set -euo pipefail
cd "$(dirname "$0")/.."
PY=python
[ -x .venv/bin/python ] && PY=.venv/bin/python
W="${1:-data/grpo_smoke}"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
export TRANSFORMERS_VERBOSITY=error HF_DATASETS_DISABLE_PROGRESS_BARS=1 PYTHONWARNINGS=ignore
start=$(date +%s)
step() { echo "== [$(( $(date +%s) - start ))s] $*"; }
D="$W/data" M="$W/tiny_model" P="$W/puma_data" O="$W/output"
mkdir -p "$W"

step "0. tiny synthetic data, its artefacts, the tiny model"
[ -f "$D/user_instructions.json" ] || "$PY" -m PersonalWAB.data synthetic --scale tiny --seed 0 --out "$D"
"$PY" -m PersonalWAB.build --data_dir "$D"
[ -f "$M/config.json" ] || "$PY" -m PUMA.tiny_model --data_dir "$D" --out "$M"

step "1. SFT data (function + parameter)"
"$PY" -m PUMA.data all --data_dir "$D" --out "$P" --model_path "$M" --mem_token_length 192

step "2. SFT with LoRA on function_param, merged"
"$PY" -m PUMA.sft --model_path "$M" --train_on function_param --function_data "$P/function_train.json" \
  --param_data "$P/param_train.json" --out "$O/sft" --num_train_epochs 1 \
  --per_device_train_batch_size 4 --gradient_accumulation_steps 1 --max_length 384 --save_strategy no
"$PY" -m PUMA.merge --adapter_path "$O/sft" --out "$O/sft_merged"

step "3-6. GRPO with LoRA on the merged SFT model, reward = the benchmark's Result Acc"
"$PY" -m PUMA.grpo --model_path "$O/sft_merged" --data_file "$P/param_train.json" --data_dir "$D" \
  --out "$O/grpo" --max_steps 8 --per_device_train_batch_size 8 --gradient_accumulation_steps 1 \
  --num_generations 4 --temperature 1.2 --max_completion_length 24 --max_prompt_length 384 \
  --learning_rate 5e-4 --save_strategy no --generation_backend hf

step "7. evaluate the puma agent generating live with the GRPO adapter"
"$PY" run.py --data_dir "$D" --agent_strategy puma --task_split test --puma_generate 1 \
  --puma_model_path "$O/grpo" --mem_token_length 192 --out "$O/result_grpo_singleturn.json" --overwrite
"$PY" -m PersonalWAB.leaderboard validate "$O/result_grpo_singleturn.json" --data_dir "$D" --quiet
step "done: result file $O/result_grpo_singleturn.json, GRPO log $O/grpo/grpo_log.jsonl"
