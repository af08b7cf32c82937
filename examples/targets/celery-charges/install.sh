#!/usr/bin/env bash
# Install what the Celery example needs: a virtual environment of its own (.venv here, not the
# harness's) with the exact versions of requirements.txt (shared/ensure-venv).  The broker is the
# harness's RabbitMQ, so nothing else.
#
#   install.sh [--python PYTHON]      the interpreter to build the environment with (python3)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
python=python3
[[ "${1:-}" == "--python" ]] && python=$2

exec "$here/../shared/ensure-venv" "$here" "$python"
