#!/usr/bin/env bash
# Install what the Celery example needs: a virtual environment of its own (.venv here, not the
# harness's) with the exact versions of requirements.txt.  The broker is the harness's RabbitMQ,
# so nothing else.  A second call costs a few stat()s: .venv/.installed holds the hash of the
# requirements and of the interpreter it was built with.
#
#   install.sh [--python PYTHON]      the interpreter to build the environment with (python3)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
python=python3
[[ "${1:-}" == "--python" ]] && python=$2

stamp="$here/.venv/.installed"
wanted=$( (cat "$here/requirements.txt"; "$python" -c 'import sys; print(sys.version)') | sha256sum | cut -d' ' -f1)
[[ -f "$stamp" && "$(cat "$stamp")" == "$wanted" ]] && exit 0

# Two workers started at once must not build one environment twice.
exec 9>"$here/.install.lock"
flock 9
[[ -f "$stamp" && "$(cat "$stamp")" == "$wanted" ]] && exit 0
echo "installing the celery-charges example into $here/.venv ..." >&2
rm -rf "$here/.venv"
"$python" -m venv "$here/.venv"
"$here/.venv/bin/python" -m pip install -q --disable-pip-version-check -r "$here/requirements.txt" >&2
echo "$wanted" >"$stamp"
