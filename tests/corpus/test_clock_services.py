"""The three corpus services whose clocks and timers differ from the reference server's, asked
directly over HTTP: what makes each correct, and that each named flaw really misbehaves.

These do not go through the harness (their target files use fields the harness may not read
yet); they pin the services' own behaviour, so a finding the harness makes on a correct mode is
the harness's to explain.  Each service is a real process; a crash is a real exit (the crash
header) or a real SIGKILL.  Waits are polls on what the service answers, bounded in time; the
only real waiting is for renewed_lease's 4 s lease, whose point is that it runs on real time,
and there a correct and a flawed process are asked side by side to share the wait.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import httpx
import pytest

from harness._errors import ServiceUnavailable
from harness.services._faketime import FaketimeClock
from harness.services._network import free_port
from harness.services._paths import project_root
from tests.corpus.services import renewed_lease
from tests.corpus.services._kit import Req, open_sqlite
from tests.missing import missing

BODY = {"amount": 1250, "currency": "usd", "customer": "cus_1"}


@dataclass(frozen=True)
class Shape:
    """Where one service keeps its routes and hooks."""

    module: str
    charges: str
    ready: str
    tenant_header: Callable[[str], dict[str, str]]
    effects_tenant: str = "tenant"
    crash_header: str = ""
    clock_field: str = ""


MEMORY_CLOCK = Shape("memory_clock", "/v1/charges", "/v1/health", lambda t: {"X-Account": t},
                     effects_tenant="account", crash_header="X-Test-Crash", clock_field="seconds")
RENEWED_LEASE = Shape("renewed_lease", "/charges", "/health",
                      lambda t: {"Authorization": f"Bearer {t}"})
SWEEPING = Shape("sweeping_cleanup", "/api/charges", "/healthz",
                 lambda t: {"Authorization": f"Bearer {t}"}, crash_header="X-Crash-At",
                 clock_field="advance_by")


@dataclass
class Service:
    """One corpus service, started as a real process on a free port with its own SQLite file."""

    shape: Shape
    workdir: Path
    flaw: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    tenant: str = field(default_factory=lambda: f"t-{uuid.uuid4().hex[:8]}")
    process: subprocess.Popen[bytes] | None = None

    def __post_init__(self) -> None:
        self.port = free_port()
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.log = self.workdir / "service.log"
        self.http = httpx.Client(base_url=f"http://127.0.0.1:{self.port}", timeout=30)

    def start(self) -> Service:
        command = [sys.executable, "-m", f"tests.corpus.services.{self.shape.module}",
                   "--port", str(self.port), "--db", str(self.workdir / "keys.sqlite3")]
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(
                command + (["--flaw", self.flaw] if self.flaw else []), cwd=project_root(),
                env={**os.environ, **self.env}, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 20
        while True:
            try:
                if self.http.get(self.shape.ready, timeout=1).status_code == 200:
                    return self
            except httpx.TransportError:
                pass
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"{self.shape.module} did not start:\n"
                                     f"{self.log.read_text()[-2000:]}")
            time.sleep(0.05)

    def exited(self, timeout: float = 10) -> int:
        assert self.process is not None
        return self.process.wait(timeout)

    def kill(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(10)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.kill()
        self.http.close()

    def charge(self, key: str, body: dict[str, Any] | None = None,
               **headers: str) -> httpx.Response:
        sent = {"Idempotency-Key": key, **self.shape.tenant_header(self.tenant),
                **{name.replace("_", "-"): value for name, value in headers.items()}}
        return self.http.post(self.shape.charges, json=body or BODY, headers=sent)

    def crash(self, key: str, point: str) -> None:
        """Send a charge that makes the process die at ``point``, then start it again."""
        with pytest.raises(httpx.TransportError):
            self.charge(key, None, **{self.shape.crash_header: point})
        assert self.exited() == 137
        self.start()

    def charges(self, key: str) -> list[str]:
        query = {self.shape.effects_tenant: self.tenant, "key": key}
        ids: list[str] = self.http.get("/admin/effects", params=query).json()["ids"]
        return ids

    def keys(self) -> dict[str, int]:
        size: dict[str, int] = self.http.get("/admin/keys").json()
        return size

    def advance(self, seconds: float) -> None:
        answer = self.http.post("/admin/clock", json={self.shape.clock_field: seconds})
        assert answer.status_code == 200, answer.text

    def wait_in_progress(self) -> None:
        until(lambda: self.keys()["in_progress"] >= 1, f"{self.shape.module}: a key in progress")


def until(holds: Callable[[], bool], what: str, *, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not holds():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.05)


def new_key() -> str:
    return f"k-{uuid.uuid4().hex}"


@pytest.fixture()
def started(tmp_path: Path) -> Iterator[Callable[..., list[Service]]]:
    """Start services side by side (in threads: each start is a Python process booting) and
    stop them all at the end: ``started(SHAPE, None, "flaw", env=...)``."""
    made: list[Service] = []

    def start(shape: Shape, *flaws: str | None, env: dict[str, str] | None = None
              ) -> list[Service]:
        services = [Service(shape, tmp_path / f"{shape.module}-{n}-{flaw or 'correct'}", flaw,
                            env or {}) for n, flaw in enumerate(flaws, start=len(made))]
        made.extend(services)
        with ThreadPoolExecutor(len(services)) as pool:
            list(pool.map(Service.start, services))
        return services

    yield start
    for service in made:
        service.stop()


def side_by_side(*actions: Callable[[], Any]) -> list[Any]:
    """Run the actions at once and return what each returned (an exception is raised here)."""
    with ThreadPoolExecutor(len(actions)) as pool:
        futures = [pool.submit(action) for action in actions]
        return [f.result(timeout=60) for f in futures]


# ---- memory_clock: keys on disk, the test clock in memory -----------------------------------


def test_memory_clock_keeps_its_keys_across_a_restart_but_not_its_clock(
        started: Callable[..., list[Service]]) -> None:
    (service,) = started(MEMORY_CLOCK, None)
    key = new_key()
    first = service.charge(key)
    assert first.status_code == 201
    service.advance(7200)
    moved = service.http.get("/admin/now").json()["now"]
    assert abs(moved - (time.time() + 7200)) < 5
    service.kill()
    service.start()
    assert abs(service.http.get("/admin/now").json()["now"] - time.time()) < 5
    replay = service.charge(key)
    assert (replay.status_code, replay.json()) == (201, first.json())
    assert replay.headers["X-Idempotent-Replay"] == "1"
    assert service.charges(key) == [first.json()["id"]]


def test_memory_clock_takes_a_crashed_claim_over_after_the_lease_and_no_takeover_never_does(
        started: Callable[..., list[Service]]) -> None:
    correct, flawed = started(MEMORY_CLOCK, None, "no-takeover")
    for service in (correct, flawed):
        after_claim, after_work = new_key(), new_key()
        service.crash(after_claim, "after-claim")
        service.crash(after_work, "after-work")
        assert service.charges(after_work) == []  # written, never committed
        for key in (after_claim, after_work):
            held = service.charge(key)
            assert held.status_code == 409 and held.headers["Retry-After"] == "1"
        service.advance(31)
        answers = [service.charge(key) for key in (after_claim, after_work)]
        if service is correct:
            assert [a.status_code for a in answers] == [201, 201]
            assert [len(service.charges(k)) for k in (after_claim, after_work)] == [1, 1]
        else:
            service.advance(3600)
            assert [service.charge(k).status_code for k in (after_claim, after_work)] == [409] * 2


def test_memory_clock_fences_off_a_slow_original_after_a_takeover(
        started: Callable[..., list[Service]]) -> None:
    (service,) = started(MEMORY_CLOCK, None)
    key = new_key()
    with ThreadPoolExecutor(1) as pool:
        original = pool.submit(service.charge, key, None, X_Test_Delay_Ms="1500")
        service.wait_in_progress()
        assert service.charge(key).status_code == 409
        service.advance(31)
        takeover = service.charge(key)
        late = original.result(timeout=10)
    assert takeover.status_code == 201
    assert late.status_code == 409  # its claim was taken over: its charge rolled back
    assert service.charges(key) == [takeover.json()["id"]]


def test_memory_clock_remembers_a_day_and_its_flaws_forget_sooner(
        started: Callable[..., list[Service]]) -> None:
    correct, short, finished = started(MEMORY_CLOCK, None, "retention-1h", "takeover-finished")
    for service, (age, replayed) in (
            (correct, (86_340, True)), (short, (7200, False)), (finished, (60, False))):
        key = new_key()
        first = service.charge(key)
        service.advance(age)
        again = service.charge(key)
        assert (again.json() == first.json()) is replayed, (service.flaw, again.json())
        assert len(service.charges(key)) == (1 if replayed else 2)
    past = new_key()
    correct.charge(past)
    correct.advance(86_460)
    assert correct.http.post("/admin/cleanup").json()["deleted"] >= 1
    assert correct.charge(past).status_code == 201 and len(correct.charges(past)) == 2


# ---- renewed_lease: a 4 s lease a heartbeat renews; the wall clock moved from outside -------


@pytest.fixture()
def faketime(tmp_path: Path) -> Iterator[FaketimeClock]:
    try:
        clock = FaketimeClock(tmp_path / "clock")
    except ServiceUnavailable as exc:
        missing(str(exc), kind="tool")
    yield clock
    clock.close()


def test_renewed_lease_answers_its_wall_clock_as_libfaketime_moves_it(
        started: Callable[..., list[Service]], faketime: FaketimeClock) -> None:
    (service,) = started(RENEWED_LEASE, None, env=faketime.environment({}))
    faketime.advance(3600)
    until(lambda: abs(float(service.http.get("/time").text) - time.time() - 3600) < 5,
          "the service's /time to show the jump", timeout=5)


def test_a_renewed_lease_holds_while_the_handler_runs_and_without_renewal_it_is_taken_over(
        started: Callable[..., list[Service]], faketime: FaketimeClock) -> None:
    """A 6 s handler under a 4 s lease; a retry 4.5 s after the claim.  Renewed, the retry gets
    409 and there is one charge; not renewed, the retry takes the key over and both charge."""
    correct, flawed = started(RENEWED_LEASE, None, "no-renewal", env=faketime.environment({}))

    def story(service: Service) -> tuple[int, int, int]:
        key = new_key()
        with ThreadPoolExecutor(1) as pool:
            original = pool.submit(service.charge, key, None, X_Test_Delay_Ms="6000")
            service.wait_in_progress()
            time.sleep(4.5)  # past the 4 s lease from the claim, in real time
            retry = service.charge(key).status_code
            first = original.result(timeout=15).status_code
        return first, retry, len(service.charges(key))

    renewed, lapsed = side_by_side(lambda: story(correct), lambda: story(flawed))
    assert renewed == (201, 409, 1)
    assert lapsed == (201, 201, 2)


def test_a_dead_or_failed_claim_frees_its_key_unless_a_renewal_outlives_it(
        started: Callable[..., list[Service]], faketime: FaketimeClock) -> None:
    """Four processes side by side, to share the real wait for the 4 s lease: a claim killed
    with its process runs out after the lease, and one whose handler raised is free at once;
    a heartbeat that renews every row in progress keeps the killed one, and a renewal not
    stopped on the error path keeps the failed one, past the lease and a beat to spare."""
    correct, renews_all, correct_too, renews_failed = started(
        RENEWED_LEASE, None, "renew-any-in-progress", None, "renew-after-error",
        env=faketime.environment({}))
    past_the_lease = 4 + 2.5  # the lease, then more than two beats

    def retried(service: Service, key: str, since: float) -> tuple[list[int], float]:
        """Retry every 0.25 s until a 201 or past the lease: the answers, and how long after
        ``since`` the first retry went."""
        first = time.monotonic() - since
        answers = [service.charge(key).status_code]
        while answers[-1] != 201 and time.monotonic() < since + past_the_lease:
            time.sleep(0.25)
            answers.append(service.charge(key).status_code)
        return answers, first

    def killed(service: Service) -> tuple[list[int], float, float, int]:
        key = new_key()
        with ThreadPoolExecutor(1) as pool:
            original = pool.submit(service.charge, key, None, X_Test_Delay_Ms="20000")
            service.wait_in_progress()
            service.kill()
            with pytest.raises(httpx.TransportError):
                original.result(timeout=10)
        since = time.monotonic()
        service.start()
        answers, first = retried(service, key, since)
        return answers, first, time.monotonic() - since, len(service.charges(key))

    def failed(service: Service) -> tuple[list[int], int]:
        key = new_key()
        assert service.charge(key, X_Test_Fault="raise").status_code == 500
        return retried(service, key, time.monotonic())[0], len(service.charges(key))

    ran_out, kept_alive, freed, stuck = side_by_side(
        lambda: killed(correct), lambda: killed(renews_all),
        lambda: failed(correct_too), lambda: failed(renews_failed))
    answers, first, took, charged = ran_out
    assert answers[-1] == 201 and charged == 1 and took < past_the_lease
    # the restart did not free the claim: still held at once, unless the restart took the lease
    # (at least 3 s left when killed: renewed within the second before) on a loaded machine
    assert answers[0] == 409 or first >= 3
    answers, _, took, charged = kept_alive
    assert set(answers) == {409} and charged == 0 and took >= past_the_lease
    assert freed == ([201], 1)
    answers, charged = stuck
    assert set(answers) == {409} and len(answers) > 10 and charged == 0


class ProcessDied(BaseException):
    """A SIGKILL at this statement: no handler of the service runs (it catches Exception)."""


class DiesAfterTheCharge:
    """A connection whose process dies right after the ledger's insert has run: a moment a
    kill from outside cannot aim at, so the service's own code is stepped through here."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def execute(self, sql: str, parameters: Sequence[Any] = ()) -> sqlite3.Cursor:
        cursor = self.conn.execute(sql, parameters)
        if sql.startswith("insert into ledger"):
            raise ProcessDied
        return cursor


def test_renewed_lease_killed_right_after_its_charge_leaves_neither_charge_nor_answer(
        tmp_path: Path) -> None:
    """The charge and the stored answer commit together: a process killed between the two
    leaves the claim to run out with nothing charged, so the retry that takes it over charges
    once (a charge committed on its own was charged again after the lease: a P1 the explorer
    found on the correct service under a loaded CI)."""
    db = str(tmp_path / "keys.sqlite3")
    service = renewed_lease.Service(db, {"no-renewal"})  # no heartbeat thread: this test alone
    request = Req("POST", "/charges", {}, {"idempotency-key": "k-1", "authorization": "Bearer t"},
                  json.dumps(BODY).encode())
    dying = open_sqlite(db)  # as the service opens it: no implicit transactions
    with pytest.raises(ProcessDied):
        service.charge(cast(sqlite3.Connection, DiesAfterTheCharge(dying)), request)
    dying.close()  # what the kernel does with a killed process's file: nothing committed
    with closing(sqlite3.connect(db)) as after:
        charged = after.execute("select count(*) from ledger").fetchone()[0]
        (status,) = after.execute("select status from leases where key = 'k-1'").fetchone()
    assert (charged, status) == (0, None)


# ---- sweeping_cleanup: a sweep that also deletes abandoned claims ---------------------------


def test_the_sweep_deletes_a_crashed_claim_but_keeps_a_charged_one_for_its_retry(
        started: Callable[..., list[Service]]) -> None:
    correct, flawed = started(SWEEPING, None, "sweep-charged")

    def story(service: Service) -> tuple[dict[str, int], bool, int, int]:
        claimed, charged = new_key(), new_key()
        service.crash(claimed, "after-claim")
        service.crash(charged, "after-work")
        (made,) = service.charges(charged)
        assert service.keys() == {"rows": 2, "in_progress": 2}
        assert service.charge(charged).status_code == 409
        service.advance(31)
        # the background sweep, every 2 s of real time, with no request to start it
        until(lambda: service.keys()["rows"] < 2, "the sweep", timeout=5)
        left = service.keys()
        retried = service.charge(charged)
        assert retried.status_code == 201
        assert service.charge(claimed).status_code == 201
        return (left, retried.json()["id"] == made, len(service.charges(charged)),
                len(service.charges(claimed)))

    kept, swept = side_by_side(lambda: story(correct), lambda: story(flawed))
    assert kept == ({"rows": 1, "in_progress": 1}, True, 1, 1)
    assert swept == ({"rows": 0, "in_progress": 0}, False, 2, 1)


def charging_slowly(service: Service, pool: ThreadPoolExecutor) -> tuple[str, Future[Any]]:
    """A charge held 1.5 s after its charge is written (the recovery point): its key and its
    pending answer, once the charge is there.  Under sweep-running the background sweep may
    take the claim in the 10 ms before the charge (the original then charges nothing): then
    again with another key, a few times at most."""
    for _ in range(3):
        key = new_key()
        original = pool.submit(service.charge, key, None, X_Test_Delay_Ms="1500")
        def charged_or_done(k: str = key, o: Future[Any] = original) -> bool:
            return bool(service.charges(k)) or o.done()

        until(charged_or_done, "the original's charge")
        if service.charges(key):
            return key, original
    raise AssertionError("the original never charged: its claim was always swept first")


def test_a_retry_while_the_original_runs_waits_unless_the_sweep_deletes_running_rows(
        started: Callable[..., list[Service]]) -> None:
    correct, flawed = started(SWEEPING, None, "sweep-running")

    def story(service: Service) -> tuple[int, int, int, int]:
        with ThreadPoolExecutor(1) as pool:
            key, original = charging_slowly(service, pool)
            retry = service.charge(key).status_code
            first = original.result(timeout=10).status_code
        return first, retry, service.charge(key).status_code, len(service.charges(key))

    waited, swept = side_by_side(lambda: story(correct), lambda: story(flawed))
    assert waited == (201, 409, 201, 1)
    assert swept == (201, 201, 201, 2)


def test_a_takeover_after_a_clock_jump_finishes_the_charge_it_found(
        started: Callable[..., list[Service]]) -> None:
    (service,) = started(SWEEPING, None)
    with ThreadPoolExecutor(1) as pool:
        key, original = charging_slowly(service, pool)
        service.advance(31)
        takeover = service.charge(key)
        late = original.result(timeout=10)
    assert takeover.status_code == late.status_code == 201
    assert takeover.headers["Idempotent-Replayed"] == "true"  # the charge it found, repeated
    assert "Idempotent-Replayed" not in late.headers
    assert service.charges(key) == [late.json()["id"]] == [takeover.json()["id"]]


def test_expired_keys_are_swept_unless_there_is_no_cleanup(
        started: Callable[..., list[Service]]) -> None:
    correct, flawed = started(SWEEPING, None, "no-cleanup")
    for service in (correct, flawed):
        keys = [new_key() for _ in range(3)]
        for key in keys:
            assert service.charge(key).status_code == 201
        service.advance(24 * 3600 + 60)
        swept = service.http.post("/admin/cleanup").json()["deleted"]
        assert swept == (3 if service is correct else 0)
        assert service.keys()["rows"] == (0 if service is correct else 3)
        again = service.charge(keys[0])  # forgotten either way: a new charge
        assert again.status_code == 201 and len(service.charges(keys[0])) == 2
