# Source me: `source scripts/set_api_key.sh`
# Exports model-provider keys from a git-ignored .env at the repo root (KEY=VALUE lines,
# optional `export ` prefix, optional quotes, # comments). Lines are parsed, never
# evaluated, so a .env cannot run code. Values already in the environment win. Prints the
# names of the keys that are set, never their values.

_pwab_load_env() {
  local root env_file line name value
  root="$(cd "$(dirname "${BASH_SOURCE[0]:-$0}")/.." && pwd)"
  env_file="$root/.env"
  [ -f "$env_file" ] || return 0
  while IFS= read -r line || [ -n "$line" ]; do
    line="${line%$'\r'}"
    line="${line#"${line%%[![:space:]]*}"}"
    case "$line" in ''|'#'*) continue ;; esac
    line="${line#export }"
    name="${line%%=*}"
    name="${name%"${name##*[![:space:]]}"}"
    if [ "$name" = "$line" ] || ! [[ "$name" =~ ^[A-Za-z_][A-Za-z0-9_]*$ ]]; then
      echo "set_api_key: skipping a malformed line in .env (not KEY=VALUE)" >&2
      continue
    fi
    value="${line#*=}"
    value="${value#"${value%%[![:space:]]*}"}"
    value="${value%"${value##*[![:space:]]}"}"
    case "$value" in
      \"*\") value="${value:1:${#value}-2}" ;;
      \'*\') value="${value:1:${#value}-2}" ;;
    esac
    [ -n "${!name+x}" ] || export "$name=$value"
  done < "$env_file"
}

_pwab_report_keys() {
  local name found=""
  for name in OPENAI_API_KEY ANTHROPIC_API_KEY AZURE_API_KEY AZURE_API_BASE AZURE_API_VERSION \
      GEMINI_API_KEY GROQ_API_KEY MISTRAL_API_KEY DEEPSEEK_API_KEY TOGETHERAI_API_KEY \
      OPENROUTER_API_KEY HF_TOKEN; do
    [ -n "${!name:-}" ] && found="$found $name"
  done
  if [ -n "$found" ]; then
    echo "set_api_key: set:$found"
  else
    echo "set_api_key: warning: no model API key is set (add KEY=VALUE lines to .env); offline agents still run" >&2
  fi
}

_pwab_load_env
_pwab_report_keys
unset -f _pwab_load_env _pwab_report_keys
