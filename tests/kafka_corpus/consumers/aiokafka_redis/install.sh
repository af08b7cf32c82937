#!/usr/bin/env bash
# Build this worker's virtual environment (.venv, the exact versions of requirements.txt):
#   install.sh [PYTHON]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
exec "$here/../../../../examples/targets/shared/ensure-venv" "$here" "${1:-python3}"
