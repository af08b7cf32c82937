"""What a probe sends with: the recording client, fresh keys, one tenant, and effects counted.

The normal recording client (every answer's headers kept, since the probe is looking for the one
that marks a replay), fresh keys, one tenant, and the count of every effect it caused.

The probe's requests go through the target's Toxiproxy proxy like any run's, and are recorded
in a history; at the end the oracle counts each key the probe used, so nothing it charged goes
unreported.
"""

from __future__ import annotations

import random
import re
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from harness._history import Event, History
from harness._target import Endpoint, keyless_counting, render_template
from harness.evidence._oracle import record_effects, record_total
from harness.http._client import RecordingClient, Request
from harness.http._deployment import Deployment

__all__ = ["VOLATILE_HEADERS", "ProbeEffects", "ProbeSession"]

#: Headers that differ between any two answers, or say nothing about a replay.
VOLATILE_HEADERS = frozenset({
    "date", "server", "content-length", "connection", "keep-alive", "transfer-encoding",
    "x-request-id", "request-id", "x-correlation-id", "traceparent", "etag", "last-modified",
    "age", "via", "vary", "set-cookie", "x-response-time", "x-runtime", "location",
    "content-type", "retry-after",
})


class _EveryHeader(RecordingClient):
    """The recording client, keeping every header an answer carries (but the volatile ones):
    the probe does not know yet which one marks a replay."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        #: Every completion's headers by history index: what the history keeps, and more.
        self.seen: dict[int, dict[str, str]] = {}

    def _record_answer(self, invocation: Event, status: int, all_headers: Mapping[str, str],
                       content: bytes) -> Event:
        completion = super()._record_answer(invocation, status, all_headers, content)
        extra = {k.lower(): v for k, v in all_headers.items() if k.lower() not in VOLATILE_HEADERS}
        self.seen[completion.index] = {**extra, **(completion.headers or {})}
        return completion


@dataclass(frozen=True, slots=True)
class ProbeEffects:
    """What the probe caused: per key (``None``: without a key), charges counted against the
    charges expected (one for a key that got a 2xx), or why they could not be counted."""

    counted: Mapping[str | None, int]
    expected: Mapping[str | None, int]
    problems: tuple[str, ...]

    @property
    def unexpected(self) -> dict[str | None, tuple[int, int]]:
        return {k: (n, self.expected.get(k, 0)) for k, n in self.counted.items()
                if n != self.expected.get(k, 0)}


class ProbeSession:
    """Sends the probe's requests and remembers what came back."""

    def __init__(self, deployment: Deployment, *, seed: int | None = None) -> None:
        self.deployment = deployment
        self.target = deployment.target
        self.history = History()
        self.client = _EveryHeader(self.target, self.history,
                                   [i.url for i in deployment.instances])
        self.rng = random.Random(seed)
        # Fresh whatever the seed: a service that keeps its keys must never see a key twice.
        self.run = uuid.uuid4().hex[:6]
        self.tenant = f"probe-{self.run}" if self.target.tenant is not None else None
        self._counter = 0
        self._lock = threading.Lock()
        self._keyless: list[Event] = []
        #: Charges a key may rightly have made, where more than one (``expect``).
        self._expected: dict[str, int] = {}

    # ---- keys and bodies -----------------------------------------------------------------

    def key(self, middle: str = "", length: int | None = None) -> str:
        """A fresh key: letters and digits, ``middle`` inside it, padded to ``length``."""
        with self._lock:
            self._counter += 1
            base = f"Probe{self.run}n{self._counter:03d}"
        key = base + middle + ("z" if middle else "")
        if length is not None:
            key = (key + "x" * length)[:length] if length >= len(key) else base[:length]
        return key

    def body(self, operation: Endpoint | None = None, **fields: Any) -> Any:
        values = {"amount": self.rng.randint(100, 99_999), "nonce": uuid.uuid4().hex,
                  "customer": f"cus_{self.rng.randint(1000, 9999)}"}
        body = render_template((operation or self.target.endpoint).body, values)
        if fields and isinstance(body, dict):
            body.update(fields)
        return body

    # ---- sending ---------------------------------------------------------------------------

    def send(self, key: str | None, body: Any, *, label: str, path: str | None = None,
             headers: Mapping[str, str] | None = None, timeout: float | None = None) -> Event:
        request = Request(key=key, tenant=self.tenant, body=body, path=path, label=label,
                          headers=dict(headers or {}))
        return self.client.send(request, process="probe", timeout=timeout)

    def send_keyless(self, body: Any) -> Event:
        """A request without a key; with only a total to count by, counted around it alone."""
        oracle = self.deployment.oracle
        assert oracle is not None
        by_total = keyless_counting(self.target.effects) == "total"
        if by_total:
            record_total(self.history, oracle)
        answer = self.send(None, body, label="probe: no key")
        if by_total:
            record_total(self.history, oracle)
        self._keyless.append(answer)
        return answer

    def in_background(self, send: Callable[[], Event]) -> Callable[[], Event | None]:
        """Run ``send`` in a thread; the returned call waits for its answer (None if none
        came within the client's timeout and a margin)."""
        result: list[Event] = []
        thread = threading.Thread(target=lambda: result.append(send()), daemon=True)
        thread.start()

        def wait() -> Event | None:
            thread.join(timeout=self.target.client.timeout + 10)
            return result[0] if result else None

        return wait

    def headers(self, event: Event) -> dict[str, str]:
        return self.client.seen.get(event.index, dict(event.headers or {}))

    def wait_until_in_progress(self, timeout: float = 5.0) -> bool:
        """True once the target reports a key in progress; False (after a short pause) when it
        cannot say."""
        hook = self.target.hooks.store_size
        if hook is None or not hook.reports_in_progress:
            time.sleep(0.3)
            return False
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.deployment.store_size().get("in_progress", 0) > 0:
                return True
            time.sleep(0.02)
        return False

    # ---- effects -------------------------------------------------------------------------

    def expect(self, key: str, charges: int) -> None:
        """Say that ``key`` may rightly have made ``charges`` charges (a key asked again after
        its retention ran out is executed anew): no more is a bug."""
        self._expected[key] = charges

    def count_now(self) -> None:
        """Count every key used so far, now: before a restart that may take an in-memory
        ledger with it.  A key used again afterwards is counted again at the end."""
        oracle = self.deployment.oracle
        assert oracle is not None
        for key in self._uncounted(self.history.events()):
            record_effects(self.history, oracle, self.tenant, key)

    @staticmethod
    def _uncounted(events: Sequence[Event]) -> list[str]:
        """The keys used with no count recorded since their last request."""
        fresh: dict[str, bool] = {}
        for event in events:
            if event.key is None:
                continue
            if event.f == "request":
                fresh[event.key] = True
            elif event.f == "effects":
                fresh[event.key] = False
        return [key for key, waiting in fresh.items() if waiting]

    def count_effects(self) -> ProbeEffects:
        """Ask the oracle about every key the probe used (but those counted since their last
        request, ``count_now``), and what it charged without one."""
        oracle = self.deployment.oracle
        assert oracle is not None
        events = self.history.events()
        answered: dict[str | None, bool] = {}
        for event in events:
            if event.f == "request" and event.type != "invoke":
                answered[event.key] = answered.get(event.key, False) or event.type == "ok"
        counted: dict[str | None, int] = {}
        problems: list[str] = []
        for key in self._uncounted(events):
            record_effects(self.history, oracle, self.tenant, key)
        for event in self.history.events():
            if event.f != "effects" or event.key is None:
                continue
            if event.type == "ok":
                counted[event.key] = int(event.value["count"])
            elif event.error:
                problems.append(f"{_shown(event.key)}: {_first_line(event.error)}")
        keyless = self._keyless_charges(problems)
        if keyless is not None:
            counted[None] = keyless
        expected = {k: max(int(ok), self._expected.get(k, 0) if k is not None else 0)
                    for k, ok in answered.items()}
        for key in [k for k in expected if k is not None and not k.isascii()]:
            if expected[key] and counted.get(key) == 0:
                # Header bytes decoded as latin-1 (WSGI, Starlette, Node) store another
                # spelling of the key than the UTF-8 one the effects query asks about.
                problems.append(f"{_shown(key)}: answered 2xx, and the effects query finds no "
                                "charge under its UTF-8 spelling; the server may hold it under "
                                "another (header bytes read as latin-1), so whether it charged "
                                "is unknown")
                del expected[key], counted[key]
        return ProbeEffects(counted, expected, tuple(problems))

    def _keyless_charges(self, problems: list[str]) -> int | None:
        if not self._keyless:
            return None
        how = keyless_counting(self.target.effects)
        if how == "total":
            totals = [e.value["total"] for e in self.history.events()
                      if e.f == "effects-total" and e.type == "ok"]
            if len(totals) >= 2:
                return int(totals[-1]) - int(totals[0])
            problems.append("the totals around the keyless request could not be counted")
            return None
        if how == "none":
            problems.append("charges made without a key cannot be counted: the target file "
                            "has no [effects] keyless")
            return None
        oracle = self.deployment.oracle
        assert oracle is not None
        before = len(self.history)
        record_effects(self.history, oracle, self.tenant, None)
        event = self.history.events()[before]
        if event.type == "ok":
            return int(event.value["count"])
        problems.append(event.error or "charges made without a key could not be counted")
        return None

    def close(self) -> None:
        self.client.close()


def _shown(key: str | None) -> str:
    if key is None:
        return "without a key"
    return f"key {key!r}" if len(key) <= 40 else f"key {key[:24]!r}... ({len(key)} characters)"


def _first_line(error: str, limit: int = 160) -> str:
    """An oracle's error, short: its first line, without the URL (which repeats the key)."""
    line = error.splitlines()[0]
    line = re.sub(r"for url '[^']*'", "", line)
    line = re.sub(r"\{'tenant'[^}]*\}", "", line)
    return line if len(line) <= limit else line[:limit] + "..."
