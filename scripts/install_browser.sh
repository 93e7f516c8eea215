#!/usr/bin/env bash
# Install Debian's chromium for the report's browser test; does nothing when it is already there.
# Without recommended packages: headless chromium needs none of them (checked on a minimal
# Debian 12: 174 packages instead of about 330).
# Needs root (or sudo) and apt access: bash scripts/install_browser.sh
set -euo pipefail
if [ -x /usr/bin/chromium ]; then
  exit 0
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "install_browser.sh: run as root (or install sudo) to install chromium" >&2; exit 1; }
  SUDO="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update
$SUDO apt-get install -y --no-install-recommends chromium
