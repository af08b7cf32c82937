#!/usr/bin/env bash
# Start the confluent-kafka worker in its own virtual environment (built by install.sh, or here the
# first time): start.sh PYTHON ARGS... (the worker's own arguments follow the interpreter that
# builds the environment).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
python=$1
shift
"$here/../../../../examples/targets/shared/ensure-venv" "$here" "$python"
exec "$here/.venv/bin/python" "$here/consumer.py" "$@"
