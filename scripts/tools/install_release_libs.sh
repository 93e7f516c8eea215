#!/usr/bin/env bash
# Install the Python libraries of the original release's time into a folder of their own, for
# the parity harness's `puma` check (`release_parity.py --release_libs DIR`):
#
#   bash scripts/tools/install_release_libs.sh DIR
#
# The release (HongruCai/PersonalWAB at 23ff65c) ran on transformers 4.45 and TRL 0.11 with the
# PEFT, accelerate and datasets of that time; this project runs on today's. The folder holds
# those versions (and the small packages the release imports that this project does not
# install), installed with `--no-deps` so they run on this machine's torch from .venv: torch is
# never installed there. Nothing is installed into .venv. Running it again when everything is
# in place changes nothing.
set -euo pipefail

if [[ $# -ne 1 || "$1" == -* ]]; then
    echo "usage: bash scripts/tools/install_release_libs.sh DIR" >&2
    exit 2
fi
target="$1"
repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
python_bin="$repo_root/.venv/bin/python"
if [[ ! -x "$python_bin" ]]; then
    echo "error: $python_bin not found: create the project's virtual environment first (see README.md)" >&2
    exit 2
fi

# name==version: the versions of the release's time (autumn 2024).
packages=(
    transformers==4.45.2 tokenizers==0.20.3 huggingface_hub==0.25.2 trl==0.11.4 peft==0.13.2
    accelerate==0.34.2 datasets==3.0.1 sentencepiece==0.2.0
    tenacity==9.0.0 termcolor==2.5.0 tabulate==0.9.0
)

installed() {  # name==version has its dist-info in the folder
    local name="${1%%==*}" version="${1##*==}"
    compgen -G "$target/${name//-/_}-${version}.dist-info" >/dev/null
}

missing=()
for package in "${packages[@]}"; do
    installed "$package" || missing+=("$package")
done
if [[ ${#missing[@]} -eq 0 ]]; then
    echo "release libraries: all ${#packages[@]} already in $target; nothing to do"
else
    echo "release libraries: installing ${missing[*]}"
    echo "  into $target with --no-deps (this machine's torch from .venv is used; .venv is not changed) ..."
    mkdir -p "$target"
    "$python_bin" -m pip install --quiet --disable-pip-version-check --no-deps --upgrade --target "$target" \
        "${missing[@]}"
fi

if [[ -e "$target/torch" ]]; then
    echo "error: $target holds a torch package; the release libraries run on .venv's torch: remove $target/torch*" >&2
    exit 1
fi
echo "release libraries: checking that they import beside .venv's torch ..."
PYTHONPATH="$target" "$python_bin" - "$target" <<'EOF'
import importlib
import sys
from pathlib import Path

target = Path(sys.argv[1]).resolve()
for name in ("transformers", "tokenizers", "huggingface_hub", "trl", "peft", "accelerate", "datasets", "sentencepiece"):
    module = importlib.import_module(name)
    if target not in Path(module.__file__).resolve().parents:
        sys.exit(f"error: {name} was imported from {module.__file__}, not from {target}")
    print(f"  {name} {module.__version__}")
import torch

print(f"  torch {torch.__version__} (from {Path(torch.__file__).parent})")
EOF
echo "release libraries: ready; pass --release_libs $target to scripts/tools/release_parity.py"
echo "  (or set PWAB_RELEASE_LIBS=$target)"
