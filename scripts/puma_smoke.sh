#!/usr/bin/env bash
# PUMA end to end on CPU in a few minutes per recipe: tiny synthetic data, a tiny random Llama with a
# locally trained tokenizer, and steps 1-7 with tiny settings (one `puma run`, settings in
# scripts/puma_smoke.yaml), for RECIPE=release, RECIPE=improved, both (the default), one after the
# other, or a recipe file of your own (RECIPE=my_recipe.yaml, its run in WORK_DIR/my_recipe). The scores mean nothing; each recipe's run shows every step works and ends with a validated
# PersonalWAB result file for the puma agent, and every output has its record (*.puma_run.json /
# puma_run.json) naming the recipe, its departures from the release and its resolved settings.
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
  case "$r" in
    release|improved) ;;
    *.yaml|*.yml) [ -f "$r" ] || { echo "RECIPE=$r: no such recipe file" >&2; exit 2; } ;;
    *) echo "RECIPE=$r: expected release, improved, both or a recipe file (.yaml)" >&2; exit 2 ;;
  esac
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
  rstart=$(date +%s)
  step "[$R] steps 1-7: puma run --config scripts/puma_smoke.yaml"
  name=$(basename "$R" .yaml)
  "$PY" -m PUMA run --config scripts/puma_smoke.yaml --recipe "$R" --data_dir "$D" --model_path "$M" \
    --work_dir "$W/$name"
  step "[$R] done in $(( $(date +%s) - rstart ))s: result file $W/$name/result_puma_singleturn.json"
done
