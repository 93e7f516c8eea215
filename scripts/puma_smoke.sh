#!/usr/bin/env bash
# PUMA end to end on CPU in a few minutes: tiny synthetic data, a tiny random Llama with a
# locally trained tokenizer, and steps 1-7 with tiny settings. The scores mean nothing; the
# run shows every step works and ends with a PersonalWAB result file for the puma agent.
#   bash scripts/puma_smoke.sh [WORK_DIR]        # default data/puma_smoke
set -euo pipefail
cd "$(dirname "$0")/.."
PY=python
[ -x .venv/bin/python ] && PY=.venv/bin/python
W="${1:-data/puma_smoke}"
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
"$PY" -m PUMA.data all --data_dir "$D" --out_dir "$P" --model_path "$M" --mem_token_length 192

step "2. SFT with LoRA on function_param"
"$PY" -m PUMA.sft --model_path "$M" --train_on function_param --function_data "$P/function_train.json" \
  --param_data "$P/param_train.json" --output_dir "$O/sft" --num_train_epochs 1 \
  --per_device_train_batch_size 4 --gradient_accumulation_steps 1 --max_length 384 --save_strategy no
"$PY" -m PUMA.merge --adapter_path "$O/sft" --output_dir "$O/sft_merged"

step "3. generation: test functions, train parameter candidates"
"$PY" -m PUMA.generate --model_path "$O/sft_merged" --mode function --data_file "$P/function_test.json" \
  --output_file "$O/function_test.json" --batch_size 32
"$PY" -m PUMA.generate --model_path "$O/sft_merged" --mode param --data_file "$P/param_train.json" \
  --output_file "$O/param_candidates_train.json" --max_new_tokens 24 --num_return_sequences 4 --num_beams 1 \
  --do_sample --temperature 1.5 --batch_size 32 --max_prompt_tokens 384

step "4. score the candidates"
"$PY" -m PUMA.score --data_dir "$D" --task_split train --candidates_file "$O/param_candidates_train.json" \
  --output_file "$O/param_candidates_train_scores.json"

step "5. DPO pairs"
"$PY" -m PUMA.dpo_data --scores_file "$O/param_candidates_train_scores.json" --param_data "$P/param_train.json" \
  --output_file "$P/dpo_train.json"

step "6. DPO with LoRA on the merged SFT model"
"$PY" -m PUMA.dpo --model_path "$O/sft_merged" --data_file "$P/dpo_train.json" --output_dir "$O/dpo" \
  --num_train_epochs 1 --per_device_train_batch_size 4 --gradient_accumulation_steps 1 --max_length 416 \
  --max_prompt_length 384 --save_strategy no

step "7. test parameters from the DPO model, then evaluate the puma agent"
"$PY" -m PUMA.generate --model_path "$O/dpo" --mode param --data_file "$P/param_test.json" \
  --output_file "$O/param_test.json" --max_new_tokens 24 --num_return_sequences 1 --num_beams 1 --no-do_sample \
  --batch_size 32 --max_prompt_tokens 384
"$PY" run.py --data_dir "$D" --agent_strategy puma --task_split test \
  --puma_function_file "$O/function_test.json" --puma_param_file "$O/param_test.json" \
  --output "$O/result_puma_singleturn.json"
step "done: result file $O/result_puma_singleturn.json"
