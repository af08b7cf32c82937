#!/usr/bin/env bash
# Start the django-idempotency-key example on 127.0.0.1:PORT (gunicorn, one process, eight
# threads), installing it first if needed, with a Redis server of its own under WORKDIR.  The
# harness runs this from the target file's [start].
# Options: ../shared/start-options.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/../shared/start-options"

"$here/install.sh" --python "$python"
REDIS_URL=$(example_redis_url)
export REDIS_URL DJANGO_SETTINGS_MODULE=charges_site.settings
exec "$here/.venv/bin/gunicorn" --chdir "$here" --bind "127.0.0.1:$port" \
  --workers 1 --threads 8 --graceful-timeout 2 charges_site.wsgi:application
