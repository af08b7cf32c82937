#!/usr/bin/env bash
# Install what the django-idempotency-key example needs: Redis from Debian's packages when absent,
# then a virtual environment of its own (.venv here, not the harness's) with the exact versions of
# requirements.txt (shared/ensure-venv).
#
#   install.sh [--python PYTHON]      the interpreter to build the environment with (python3)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
python=python3
[[ "${1:-}" == "--python" ]] && python=$2

"$here/../shared/ensure-command" redis-server redis-server
exec "$here/../shared/ensure-venv" "$here" "$python"
