#!/usr/bin/env bash
# PUMA end to end on CPU in a few minutes per recipe: tiny synthetic data, a tiny random Llama with a
# locally trained tokenizer, and steps 1-7 with tiny settings, for RECIPE=release, RECIPE=improved, or
# both (the default), one after the other. The scores mean nothing; each recipe's run shows every step
# works and ends with a PersonalWAB result file for the puma agent, and every output has its record
# (*.puma_run.json / puma_run.json) naming the recipe and its departures from the release.
#   bash scripts/puma_smoke.sh [WORK_DIR]        # default data/puma_smoke
#   RECIPE=improved bash scripts/puma_smoke.sh
set -euo pipefail
cd "$(dirname "$0")/.."
PY=python
[ -x .venv/bin/python ] && PY=.venv/bin/python
W="${1:-data/puma_smoke}"
RECIPES="${RECIPE:-both}"
[ "$RECIPES" = both ] && RECIPES="release improved"
for r in $RECIPES; do
  case "$r" in release|improved) ;; *) echo "RECIPE=$r: expected release, improved or both" >&2; exit 2 ;; esac
done
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
export TRANSFORMERS_VERBOSITY=error HF_DATASETS_DISABLE_PROGRESS_BARS=1 PYTHONWARNINGS=ignore
start=$(date +%s)
step() { echo "== [$(( $(date +%s) - start ))s] $*"; }
D="$W/data" M="$W/tiny_model"
mkdir -p "$W"

step "0. tiny synthetic data, its artefacts (PUMA's relevance embeddings too), the tiny model"
[ -f "$D/user_instructions.json" ] || "$PY" -m PersonalWAB.data synthetic --scale tiny --seed 0 --out "$D"
"$PY" -m PersonalWAB.build --data_dir "$D" --puma_embeddings
[ -f "$M/config.json" ] || "$PY" -m PUMA.tiny_model --data_dir "$D" --out "$M"

for R in $RECIPES; do
  P="$W/$R/puma_data" O="$W/$R/output"
  rstart=$(date +%s)
  step "[$R] 1. SFT data (function + parameter)"
  "$PY" -m PUMA.data all --recipe "$R" --data_dir "$D" --out_dir "$P" --model_path "$M" --mem_token_length 192

  step "[$R] 2. SFT with LoRA on function_param"
  "$PY" -m PUMA.sft --recipe "$R" --model_path "$M" --train_on function_param --function_data "$P/function_train.json" \
    --param_data "$P/param_train.json" --output_dir "$O/sft" --num_train_epochs 1 \
    --per_device_train_batch_size 4 --gradient_accumulation_steps 1 --max_length 384 --save_strategy no
  "$PY" -m PUMA.merge --recipe "$R" --adapter_path "$O/sft" --output_dir "$O/sft_merged"

  step "[$R] 3. generation: functions of both splits, train parameter candidates (beam sampling, early stopping)"
  for split in train test; do
    "$PY" -m PUMA.generate --recipe "$R" --model_path "$O/sft_merged" --mode function \
      --data_file "$P/function_$split.json" --output_file "$O/function_$split.json" --batch_size 40
  done
  "$PY" -m PUMA.generate --recipe "$R" --model_path "$O/sft_merged" --mode param --data_file "$P/param_train.json" \
    --function_file "$O/function_train.json" --mem_token_length 192 \
    --output_file "$O/param_candidates_train.json" --max_new_tokens 16 --num_return_sequences 3 --num_beams 3 \
    --do_sample --temperature 1.5 --batch_size 32 --max_prompt_tokens 384

  step "[$R] 4. score the candidates"
  "$PY" -m PUMA.score --recipe "$R" --data_dir "$D" --task_split train --candidates_file "$O/param_candidates_train.json" \
    --output_file "$O/param_candidates_train_scores.json"

  step "[$R] 5. DPO pairs"
  "$PY" -m PUMA.dpo_data --recipe "$R" --scores_file "$O/param_candidates_train_scores.json" \
    --param_data "$P/param_train.json" --output_file "$P/dpo_train.json" --model_path "$O/sft_merged" --max_length 416

  step "[$R] 6. DPO with LoRA on the merged SFT model"
  "$PY" -m PUMA.dpo --recipe "$R" --model_path "$O/sft_merged" --data_file "$P/dpo_train.json" --output_dir "$O/dpo" \
    --num_train_epochs 1 --per_device_train_batch_size 4 --gradient_accumulation_steps 1 --max_length 416 \
    --max_prompt_length 384 --save_strategy no

  step "[$R] 7. test parameters from the DPO model, then evaluate the puma agent"
  "$PY" -m PUMA.generate --recipe "$R" --model_path "$O/dpo" --mode param --data_file "$P/param_test.json" \
    --function_file "$O/function_test.json" --mem_token_length 192 --output_file "$O/param_test.json" --max_new_tokens 24 --num_return_sequences 1 --num_beams 1 --no-do_sample \
    --batch_size 40 --max_prompt_tokens 384
  "$PY" run.py --data_dir "$D" --agent_strategy puma --puma_recipe "$R" --task_split test \
    --puma_function_file "$O/function_test.json" --puma_param_file "$O/param_test.json" \
    --output "$O/result_puma_singleturn.json" --overwrite
  "$PY" -m PersonalWAB.leaderboard validate "$O/result_puma_singleturn.json" --data_dir "$D" --quiet
  step "[$R] done in $(( $(date +%s) - rstart ))s: result file $O/result_puma_singleturn.json"
done
