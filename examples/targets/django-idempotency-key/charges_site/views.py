"""The charge endpoint, written as domain logic should be: as if every call were the first.

Deduplication is the middleware's job.  The view validates the charge, waits the simulated
provider latency (``X-Test-Delay-Ms``, the harness's slow hook), charges, and answers 201;
``X-Test-Fault: handler-error`` makes the provider fail instead (the harness's handler-error
hook).  The
charge is the side effect the harness counts: it is reported to the harness's recorder
(``$IDEM_RECORDER_URL/effects``), outside the idempotency layer under test.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import time
import urllib.request
from typing import Any

from django.core.cache import cache
from django.http import HttpRequest, HttpResponse, JsonResponse

MAX_DELAY_MS = 60_000
_BEARER = re.compile(r"Bearer (\S+)")
_CURRENCY = re.compile(r"[A-Za-z]{3}")


def health(request: HttpRequest) -> HttpResponse:
    return JsonResponse({"ok": True})


def stored_keys(request: HttpRequest) -> HttpResponse:
    """The harness's store-size hook: the responses the cache still holds (django-redis lists
    them with KEYS, which skips those past their TTL; the lock's key has no cache prefix)."""
    return JsonResponse({"rows": len(cache.keys("*"))})


def charges(request: HttpRequest) -> HttpResponse:
    if request.method != "POST":
        return JsonResponse({"error": "method_not_allowed"}, status=405, headers={"Allow": "POST"})
    bearer = _BEARER.fullmatch(request.headers.get("Authorization", ""))
    if bearer is None:
        return JsonResponse({"error": "invalid_authorization"}, status=401)
    try:
        document = json.loads(request.body)
    except (ValueError, RecursionError):
        return JsonResponse({"error": "invalid_json"}, status=400)
    problem = _invalid_charge(document)
    if problem is not None:
        return JsonResponse({"error": "invalid_charge", "detail": problem}, status=400)
    if request.headers.get("X-Test-Fault") == "handler-error":
        # The provider failed before charging; a 5xx is not stored, so the key stays free.
        return JsonResponse({"error": "handler_error"}, status=500)
    delay = request.headers.get("X-Test-Delay-Ms", "0")
    if delay.isdigit():
        time.sleep(min(int(delay), MAX_DELAY_MS) / 1000)
    charge = {
        "id": f"ch_{secrets.token_hex(12)}",
        "amount": document["amount"],
        "currency": document["currency"],
        "customer": document.get("customer"),
    }
    _record(bearer.group(1), request.headers.get("Idempotency-Key"), charge["id"])
    return JsonResponse(charge, status=201, headers={"Location": f"/charges/{charge['id']}"})


def _invalid_charge(document: Any) -> str | None:
    if not isinstance(document, dict):
        return "the body must be a JSON object"
    amount = document.get("amount")
    if isinstance(amount, bool) or not isinstance(amount, int) or amount <= 0:
        return "amount must be a positive integer"
    currency = document.get("currency")
    if not isinstance(currency, str) or not _CURRENCY.fullmatch(currency):
        return "currency must be three letters"
    customer = document.get("customer")
    if customer is not None and not isinstance(customer, str):
        return "customer must be a string"
    return None


def _record(tenant: str, key: str | None, charge_id: str) -> None:
    """Report one charge to the recorder; an error here fails the request (a 500, not stored)."""
    request = urllib.request.Request(
        f"{os.environ['IDEM_RECORDER_URL']}/effects",
        data=json.dumps({"tenant": tenant, "key": key, "id": charge_id}).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=10):
        pass
