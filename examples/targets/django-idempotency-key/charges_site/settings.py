"""Settings of the example: django-idempotency-key configured as its README documents.

``IdempotencyKeyMiddleware`` makes every non-safe request need a key.  The stored responses live
in Redis through django-redis (``CacheKeyStorage``), and the storage lock is the README's
``MultiProcessRedisLock``, because the harness runs two server processes in its concurrency
scenario and the README says the default ``ThreadLock`` is for one process only.

``CONFLICT_STATUS_CODE = None`` makes a replay carry the original status code.  The library's
default (409) would answer every replay with 409 and the original body, which a client following
the IETF draft reads as "still in progress" and retries until it gives up.

Environment: REDIS_URL (the example's own Redis), IDEM_RECORDER_URL (the harness's recorder).
"""

import os

REDIS_URL = os.environ["REDIS_URL"]
RETENTION_SECONDS = 86400  # Django's cache TIMEOUT: how long a stored response is kept

SECRET_KEY = "idem-harness-example-not-a-secret"  # a local test target; nothing is signed
DEBUG = False
ALLOWED_HOSTS = ["127.0.0.1", "localhost"]
ROOT_URLCONF = "charges_site.urls"
INSTALLED_APPS: list[str] = []
DATABASES: dict[str, dict[str, str]] = {}
USE_TZ = True

MIDDLEWARE = ["idempotency_key.middleware.IdempotencyKeyMiddleware"]

CACHES = {
    "default": {
        "BACKEND": "django_redis.cache.RedisCache",
        "LOCATION": REDIS_URL,
        "TIMEOUT": RETENTION_SECONDS,
    }
}

IDEMPOTENCY_KEY = {
    "CONFLICT_STATUS_CODE": None,
    "STORAGE": {
        "CLASS": "idempotency_key.storage.CacheKeyStorage",
        "CACHE_NAME": "default",
    },
    "LOCK": {
        "CLASS": "idempotency_key.locks.redis.MultiProcessRedisLock",
        "LOCATION": REDIS_URL,
    },
}
