"""The five corpus services of issue 24, checked directly over HTTP: what makes each correct,
and that each named flaw really misbehaves, before the harness is asked to tell them apart.

Each service runs as a real process (redis_store with its real redis-server, on a clock moved
by libfaketime as the harness moves it); every wait is on an event (the service or its store
reporting the key in progress, a thread's answer) and bounded.  test_corpus.py then asks
``run`` to catch each flaw with its property.
"""

from __future__ import annotations

import http.client
import json
import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
import tomllib
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest
import redis

from harness._errors import ServiceUnavailable
from harness.services._faketime import FaketimeClock
from harness.services._paths import project_root
from tests.corpus.conftest import TARGETS
from tests.missing import missing

pytestmark = pytest.mark.timeout(60)

READY = {"wsgi_latin1": "/healthz", "any_keys": "/ping", "per_fault_errors": "/up",
         "redis_store": "/health", "locked_423": "/ready"}
DAY = 24 * 3600


@dataclass(frozen=True)
class Answer:
    status: int
    headers: dict[str, str]
    body: Any

    def marked(self, header: str = "idempotent-replayed", value: str = "true") -> bool:
        return self.headers.get(header) == value


@dataclass
class Running:
    """A service process (and its process group: redis_store's Redis is in it)."""

    name: str
    port: int
    workdir: Path
    process: subprocess.Popen[bytes]
    clock: FaketimeClock | None = None
    redis_port: int = 0

    def send(self, path: str, *, key: str | None = None, body: Any = None,
             headers: dict[str, str] | None = None, method: str = "POST",
             timeout: float = 10) -> Answer:
        """One request; the key is sent as UTF-8 octets, as the harness sends it."""
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            data = b"" if body is None else json.dumps(body, ensure_ascii=False).encode()
            connection.putrequest(method, path)
            if key is not None:
                connection.putheader("Idempotency-Key", key.encode("utf-8"))
            for name, value in (headers or {}).items():
                connection.putheader(name, value)
            connection.putheader("Content-Type", "application/json")
            connection.putheader("Content-Length", str(len(data)))
            connection.endheaders(data)
            response = connection.getresponse()
            raw = response.read()
            return Answer(response.status, {k.lower(): v for k, v in response.getheaders()},
                          json.loads(raw) if raw else None)
        finally:
            connection.close()

    def get(self, path: str, **query: str) -> Any:
        answer = self.send(f"{path}?{urlencode(query)}" if query else path, method="GET")
        assert answer.status == 200, answer
        return answer.body


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def until(condition: Callable[[], bool], what: str, limit: float = 10.0) -> None:
    """Wait for ``condition``, polling every 10 ms, at most ``limit`` seconds."""
    deadline = time.monotonic() + limit
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


def own_clock(workdir: Path) -> FaketimeClock:
    if shutil.which("redis-server") is None:
        missing("redis-server is not installed: apt-get install -y redis-server", kind="tool")
    try:
        return FaketimeClock(workdir / "faketime")
    except ServiceUnavailable as exc:
        missing(f"libfaketime is not ready ({exc}): run scripts/ensure-faketime", kind="tool")


@pytest.fixture(scope="module")
def services(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., Running]]:
    """Start (name, flaw) once per module, redis_store on a libfaketime clock of its own;
    every process group is ended at the end."""
    started: dict[tuple[str, str | None], Running] = {}

    def start(name: str, flaw: str | None = None) -> Running:
        if (name, flaw) in started:
            return started[(name, flaw)]
        workdir = tmp_path_factory.mktemp(f"{name}-{flaw or 'correct'}")
        port, args, env = free_port(), [], dict(os.environ)
        clock, redis_port = None, 0
        if name == "wsgi_latin1":
            args = ["--db", str(workdir / "ledger.db")]
        if name == "redis_store":
            clock, redis_port = own_clock(workdir), free_port()
            args = ["--redis-port", str(redis_port), "--redis-via", f"127.0.0.1:{redis_port}",
                    "--redis-dir", str(workdir / "redis")]
            env = clock.environment(env)
        command = [sys.executable, "-m", f"tests.corpus.services.{name}", "--port", str(port),
                   *args, *(["--flaw", flaw] if flaw else [])]
        with (workdir / "stderr").open("wb") as log:
            process = subprocess.Popen(command, cwd=project_root(), env=env,
                                       start_new_session=True, stdin=subprocess.DEVNULL,
                                       stdout=subprocess.DEVNULL, stderr=log)
        running = started[(name, flaw)] = Running(name, port, workdir, process, clock,
                                                  redis_port)

        def ready() -> bool:
            assert process.poll() is None, (workdir / "stderr").read_text()
            try:
                return running.send(READY[name], method="GET", timeout=1).status == 200
            except OSError:
                return False

        until(ready, f"{name} to answer", limit=20)
        return running

    yield start
    for running in started.values():
        os.killpg(running.process.pid, signal.SIGKILL)
        running.process.wait(timeout=10)
        if running.clock is not None:
            running.clock.close()


def target_file(name: str) -> dict[str, Any]:
    return tomllib.loads((TARGETS / f"{name}.toml").read_text())


def in_background(call: Callable[[], Answer]) -> tuple[threading.Thread, list[Answer]]:
    out: list[Answer] = []
    thread = threading.Thread(target=lambda: out.append(call()))
    thread.start()
    return thread, out


# --- wsgi_latin1 ---------------------------------------------------------------------------

CHARGE = {"amount": 1250, "currency": "usd", "customer": "cus_1"}


def ledger_count(service: Running, key: str, tenant: str = "alice") -> int:
    """The target file's own effects query, run as the harness runs it."""
    query = target_file("wsgi_latin1")["effects"]["query"]
    named = query.replace("%(tenant)s", ":tenant").replace("%(key)s", ":key")
    with sqlite3.connect(service.workdir / "ledger.db") as conn:
        count: int = conn.execute(named, {"tenant": tenant, "key": key}).fetchone()[0]
        return count


def test_wsgi_latin1_keeps_the_latin1_spelling_and_a_charge_key_is_refused_on_refunds(
        services: Callable[..., Running]) -> None:
    service = services("wsgi_latin1")
    bearer = {"Authorization": "Bearer alice"}
    first = service.send("/charges", key="clé-1", body=CHARGE, headers=bearer)
    again = service.send("/charges", key="clé-1", body=CHARGE, headers=bearer)
    assert first.status == 201 and not first.marked("idempotency-replayed")
    assert (again.status, again.body) == (201, first.body)
    assert again.marked("idempotency-replayed") and again.headers["location"] == first.headers[
        "location"]
    # PEP 3333: the key arrived as latin-1 text, and that is the spelling it is stored under.
    assert ledger_count(service, "clé-1") == 0
    assert ledger_count(service, "clé-1".encode().decode("latin-1")) == 1
    refund = service.send("/refunds", key="clé-1", body=CHARGE, headers=bearer)
    assert refund.status == 422, refund
    control = service.send("/charges", key="key\x01with\x7fcontrol", body=CHARGE, headers=bearer)
    assert control.status == 201 and ledger_count(service, "key\x01with\x7fcontrol") == 1
    assert service.send("/charges", key="", body=CHARGE, headers=bearer).status == 400
    store_size = target_file("wsgi_latin1")["hooks"]["store_size"]
    with sqlite3.connect(service.workdir / "ledger.db") as conn:
        assert conn.execute(store_size["sql"]).fetchone()[0] == 2
        assert conn.execute(store_size["in_progress_sql"]).fetchone()[0] == 0


def expired_burst(service: Running, key: str) -> list[Answer]:
    """Charge with ``key``, move the clock past the retention, then 8 concurrent copies."""
    bearer = {"Authorization": "Bearer alice"}
    assert service.send("/charges", key=key, body=CHARGE, headers=bearer).status == 201
    service.send("/_test/clock", body={"seconds": DAY + 60})
    barrier = threading.Barrier(8)

    def copy() -> Answer:
        barrier.wait(timeout=10)
        return service.send("/charges", key=key, body=CHARGE, headers=bearer)

    with ThreadPoolExecutor(8) as pool:
        return list(pool.map(lambda _: copy(), range(8)))


def test_wsgi_latin1_an_expired_key_in_a_burst_makes_one_new_charge(
        services: Callable[..., Running]) -> None:
    service = services("wsgi_latin1")
    answers = expired_burst(service, "burst-1")
    assert {a.status for a in answers} <= {201, 409}
    assert ledger_count(service, "burst-1") == 2  # the first, and one after it expired


def test_wsgi_latin1_flaw_expired_burst_charges_each_copy(
        services: Callable[..., Running]) -> None:
    service = services("wsgi_latin1", "expired-burst")
    expired_burst(service, "burst-1")
    assert ledger_count(service, "burst-1") > 2


def test_wsgi_latin1_flaw_fingerprint_no_path_replays_a_charge_as_a_refund(
        services: Callable[..., Running]) -> None:
    service = services("wsgi_latin1", "fingerprint-no-path")
    bearer = {"Authorization": "Bearer alice"}
    charge = service.send("/charges", key="k-1", body=CHARGE, headers=bearer)
    refund = service.send("/refunds", key="k-1", body=CHARGE, headers=bearer)
    assert refund.status == 201 and refund.body == charge.body
    assert refund.marked("idempotency-replayed") and refund.body["id"].startswith("ch_")
    # one factor: the query string is still in the fingerprint, only the path is not
    assert service.send("/charges?x=1", key="k-1", body=CHARGE, headers=bearer).status == 422


# --- any_keys ------------------------------------------------------------------------------

ODD_KEYS = ("clé-ключ-鍵", "key\x01with\x7fcontrol", "two words", "x" * 2000)


def charges(service: Running, key: str, tenant: str) -> int:
    count: int = service.get("/debug/effects", tenant=tenant, key=key)["count"]
    return count


def test_any_keys_takes_any_nonempty_key_and_scopes_answers_by_tenant(
        services: Callable[..., Running]) -> None:
    service = services("any_keys")
    alice, bob = {"Authorization": "Bearer alice"}, {"Authorization": "Bearer bob"}
    for key in ODD_KEYS:
        first = service.send("/v1/charges", key=key, body=CHARGE, headers=alice)
        again = service.send("/v1/charges", key=key, body=CHARGE, headers=alice)
        assert first.status == 201 and (again.status, again.body) == (201, first.body)
        assert again.marked() and not first.marked()
        assert charges(service, key, "alice") == 1  # found under the spelling sent
    assert service.send("/v1/charges", key="", body=CHARGE, headers=alice).status == 400
    theirs = service.send("/v1/charges", key=ODD_KEYS[0], body=CHARGE, headers=bob)
    assert theirs.status == 201 and not theirs.marked() and charges(service, ODD_KEYS[0],
                                                                    "bob") == 1
    service.send("/debug/clock", body={"advance": DAY + 60}, method="PUT")
    late = service.send("/v1/charges", key=ODD_KEYS[1], body=CHARGE, headers=alice)
    assert late.status == 201 and not late.marked()  # forgotten after the retention


def test_any_keys_flaw_tenant_replay_gives_another_tenant_the_first_answer(
        services: Callable[..., Running]) -> None:
    service = services("any_keys", "tenant-replay")
    mine = service.send("/v1/charges", key="shared", body=CHARGE,
                        headers={"Authorization": "Bearer alice"})
    theirs = service.send("/v1/charges", key="shared", body=CHARGE,
                          headers={"Authorization": "Bearer bob"})
    assert theirs.status == 201 and theirs.body == mine.body and theirs.marked()
    assert charges(service, "shared", "bob") == 0


def test_any_keys_flaw_stuck_in_progress_answers_409_past_the_retention(
        services: Callable[..., Running]) -> None:
    service = services("any_keys", "stuck-in-progress")
    alice = {"Authorization": "Bearer alice"}
    assert service.send("/v1/charges", key="stuck", body=CHARGE, headers=alice).status == 201
    assert service.send("/v1/charges", key="stuck", body=CHARGE, headers=alice).status == 409
    service.send("/debug/clock", body={"advance": DAY + 3600}, method="PUT")
    assert service.send("/v1/charges", key="stuck", body=CHARGE, headers=alice).status == 409
    assert service.get("/debug/keys")["in_progress"] == 1 and charges(service, "stuck",
                                                                      "alice") == 1


# --- per_fault_errors ----------------------------------------------------------------------


def paid(service: Running, key: str) -> int:
    count: int = service.get("/ops/ledger", tenant="acme", key=key)["count"]
    return count


def test_per_fault_errors_releases_on_an_exception_and_stores_a_returned_502(
        services: Callable[..., Running]) -> None:
    service = services("per_fault_errors")
    acme = {"X-Account-Id": "acme"}
    raised = service.send("/charges", key="e-1", body=CHARGE, headers={**acme,
                                                                        "X-Fault": "exception"})
    retried = service.send("/charges", key="e-1", body=CHARGE, headers=acme)
    assert (raised.status, retried.status) == (500, 201) and not retried.marked()
    assert paid(service, "e-1") == 1
    down = service.send("/charges", key="e-2", body=CHARGE,
                        headers={**acme, "X-Fault": "provider-down"})
    replayed = service.send("/charges", key="e-2", body=CHARGE, headers=acme)
    assert down.status == 502 and (replayed.status, replayed.body) == (502, down.body)
    assert replayed.marked() and paid(service, "e-2") == 0
    first = service.send("/charges", key="e-3", body=CHARGE, headers=acme)
    euro = service.send("/charges", key="e-3", body={**CHARGE, "currency": "eur"}, headers=acme)
    assert (first.status, euro.status) == (201, 422) and paid(service, "e-3") == 1
    assert service.send("/charges", key="e-4", body={**CHARGE, "currency": "gbp"},
                        headers=acme).status == 400
    assert service.send("/charges", key="e-5", body={**CHARGE, "currency": "eur"},
                        headers=acme).body["currency"] == "eur"


def test_per_fault_errors_flaw_currency_blind_replays_another_currency(
        services: Callable[..., Running]) -> None:
    service = services("per_fault_errors", "currency-blind")
    acme = {"X-Account-Id": "acme"}
    first = service.send("/charges", key="c-1", body=CHARGE, headers=acme)
    euro = service.send("/charges", key="c-1", body={**CHARGE, "currency": "eur"}, headers=acme)
    assert euro.status == 201 and euro.body == first.body and euro.marked()


# --- redis_store ---------------------------------------------------------------------------


def redis_of(service: Running) -> redis.Redis:
    return redis.Redis(host="127.0.0.1", port=service.redis_port, socket_timeout=5)


def stored_keys(service: Running) -> int:
    """The target file's count: the keys matching its pattern."""
    pattern = target_file("redis_store")["hooks"]["store_size"]["pattern"]
    return sum(1 for _ in redis_of(service).scan_iter(match=pattern))


def outlive_the_lock(service: Running, key: str) -> Answer:
    """A charge slowed past its lock's TTL (the clock moved 31 s while it runs, no retry in
    between), then an identical retry."""
    store = redis_of(service)
    bearer = {"Authorization": "Bearer alice"}
    thread, out = in_background(lambda: service.send(
        "/charges", key=key, body=CHARGE, headers={**bearer, "X-Test-Delay-Ms": "800"}))
    until(lambda: bool(store.keys("idem:lock:*")), "the lock to be taken")
    assert service.clock is not None
    service.clock.advance(31)
    assert not store.keys("idem:lock:*")  # Redis's own TTL ran out on the moved clock
    thread.join(timeout=10)
    assert out and out[0].status == 201, out
    retry = service.send("/charges", key=key, body=CHARGE, headers=bearer)
    return retry


def test_redis_store_expires_keys_with_redis_ttls_and_commits_a_lock_it_outlived(
        services: Callable[..., Running]) -> None:
    service = services("redis_store")
    bearer = {"Authorization": "Bearer alice"}
    first = service.send("/charges", key="r-1", body=CHARGE, headers=bearer)
    again = service.send("/charges", key="r-1", body=CHARGE, headers=bearer)
    assert first.status == 201 and (again.status, again.body) == (201, first.body)
    assert again.marked() and again.headers["location"] == first.headers["location"]
    assert service.send("/charges", key="r-1", body={**CHARGE, "amount": 9},
                        headers=bearer).status == 422
    assert DAY - 60 <= redis_of(service).ttl('idem:rec:["alice", "r-1"]') <= DAY
    retry = outlive_the_lock(service, "r-2")
    assert retry.status == 201 and retry.marked()
    assert service.get("/test/effects", tenant="alice", key="r-2")["count"] == 1
    assert stored_keys(service) == 2
    assert service.clock is not None
    service.clock.advance(DAY)
    assert stored_keys(service) == 0  # gone with their TTL; the ledger stays
    assert service.get("/test/effects", tenant="alice", key="r-1")["count"] == 1


def test_redis_store_flaw_no_ttl_keeps_keys_for_ever(services: Callable[..., Running]) -> None:
    service = services("redis_store", "no-ttl")
    service.send("/charges", key="n-1", body=CHARGE, headers={"Authorization": "Bearer alice"})
    assert redis_of(service).ttl('idem:rec:["alice", "n-1"]') == -1
    assert service.clock is not None
    service.clock.advance(2 * DAY)
    assert stored_keys(service) >= 1


def test_redis_store_flaw_lost_lock_stores_an_empty_fingerprint(
        services: Callable[..., Running]) -> None:
    service = services("redis_store", "lost-lock-empty-fingerprint")
    assert outlive_the_lock(service, "l-1").status == 422


# --- locked_423 ----------------------------------------------------------------------------

TRANSFER = {"amount": 300, "currency": "usd", "destination": "acct_1"}
TENANT = {"X-Tenant": "t1"}


def running_count(service: Running) -> int:
    count: int = service.get("/api/_locks")["in_progress"]
    return count


def retry_while_running(service: Running, key: str) -> tuple[Answer, float, int, Answer]:
    """A charge slowed by 1 s; once the service reports it in progress, a retry: its answer,
    how long it took, how many keys ran right after it, and the original's answer."""
    thread, out = in_background(lambda: service.send(
        "/api/transfers", key=key, body=TRANSFER, headers={**TENANT, "X-Test-Delay-Ms": "1000"}))
    until(lambda: running_count(service) == 1, "the original to run")
    began = time.monotonic()
    retry = service.send("/api/transfers", key=key, body=TRANSFER, headers=TENANT)
    took, still = time.monotonic() - began, running_count(service)
    thread.join(timeout=10)
    assert out, "the original got no answer"
    return retry, took, still, out[0]


def transfers(service: Running, key: str) -> int:
    count: int = service.get("/api/_effects", tenant="t1", key=key)["count"]
    return count


def test_locked_423_answers_423_while_running_and_releases_every_failure(
        services: Callable[..., Running]) -> None:
    service = services("locked_423")
    retry, _, _, original = retry_while_running(service, "lk-1")
    assert retry.status == 423 and not retry.marked("x-idempotent-replay", "1")
    assert "retry-after" not in retry.headers and original.status == 201
    after = service.send("/api/transfers", key="lk-1", body=TRANSFER, headers=TENANT)
    assert (after.status, after.body) == (201, original.body)
    assert after.marked("x-idempotent-replay", "1")
    for fault, status in (("answer-503", 503), ("raise", 500)):
        key = f"lk-{fault}"
        failed = service.send("/api/transfers", key=key, body=TRANSFER,
                              headers={**TENANT, "X-Test-Fault": fault})
        retried = service.send("/api/transfers", key=key, body=TRANSFER, headers=TENANT)
        assert (failed.status, retried.status) == (status, 201) and not retried.marked(
            "x-idempotent-replay", "1")
        assert transfers(service, key) == 1


def test_locked_423_flaw_placeholder_200_answers_an_empty_replay_while_running(
        services: Callable[..., Running]) -> None:
    service = services("locked_423", "placeholder-200")
    retry, took, still, original = retry_while_running(service, "ph-1")
    assert (retry.status, retry.body) == (200, {}) and retry.marked("x-idempotent-replay", "1")
    assert took < 0.5 and still == 1  # at once, while the original ran on
    assert original.status == 201 and original.body["id"].startswith("tr_")


def test_locked_423_flaw_cache_5xx_replays_the_503_and_refuses_identical_retries(
        services: Callable[..., Running]) -> None:
    service = services("locked_423", "cache-5xx")
    failed = service.send("/api/transfers", key="c5-1", body=TRANSFER,
                          headers={**TENANT, "X-Test-Fault": "answer-503"})
    retried = service.send("/api/transfers", key="c5-1", body=TRANSFER, headers=TENANT)
    assert failed.status == 503 and (retried.status, retried.body) == (503, failed.body)
    assert retried.marked("x-idempotent-replay", "1") and transfers(service, "c5-1") == 0
    raised = service.send("/api/transfers", key="c5-2", body=TRANSFER,
                          headers={**TENANT, "X-Test-Fault": "raise"})
    again = service.send("/api/transfers", key="c5-2", body=TRANSFER, headers=TENANT)
    assert (raised.status, again.status) == (500, 422)
