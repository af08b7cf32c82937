"""Hand-built histories for checker tests: a few lines of story per case."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from harness import CheckOptions, CheckResult, Event, History, check_history
from harness._history import NEMESIS, ORACLE
from harness._target import ErrorPolicy, KeylessCounting, KeySpec, Promises

REFERENCE_PROMISES = Promises(
    mode="strict", mismatch_status=422, in_progress="conflict", in_progress_status=409,
    retry_after=True, retention=86400.0, lease=30.0, errors="release",
    replay_header="Idempotent-Replayed",
)


class Story:
    """Builds a history the way the recording client and the nemesis would."""

    def __init__(self) -> None:
        self.history = History()

    def invoke(self, key: str | None, *, tenant: str | None = "t1", attempt: int = 1,
               fingerprint: str = "fp-a", label: str | None = None, method: str = "POST",
               path: str = "/charges", key_header: str | None = "auto") -> Event:
        return self.history.invoke(
            "request", f"c{attempt}", key=key, tenant=tenant, attempt=attempt, label=label,
            method=method, path=path, fingerprint=fingerprint, body='{"amount": 1}',
            key_header=(f'"{key}"' if key is not None else None) if key_header == "auto"
            else key_header,
        )

    def answer(self, invoke: Event, status: int, *, resource: str | None = None,
               digest: str | None = None, headers: dict[str, str] | None = None) -> Event:
        return self.history.complete(
            invoke, "ok" if status < 300 else "fail", status=status, resource=resource,
            body_digest=digest or f"d-{status}-{resource}", headers=headers or {},
        )

    def lose(self, invoke: Event, error: str = "timeout") -> Event:
        return self.history.complete(invoke, "info", error=error)

    def attempt(self, key: str | None, status: int | None, **kw: Any) -> Event:
        answer_kw = {k: kw.pop(k) for k in ("resource", "digest", "headers") if k in kw}
        invoke = self.invoke(key, **kw)
        if status is None:
            return self.lose(invoke)
        return self.answer(invoke, status, **answer_kw)

    def effects(self, key: str | None, count: int, *, tenant: str | None = "t1",
                ids: list[str] | None = None) -> None:
        value: dict[str, Any] = {"count": count}
        if ids is not None:
            value["ids"] = ids
        self.history.record("ok", "effects", ORACLE, tenant=tenant, key=key, value=value)

    def fault(self, name: str, *, where: str = "client") -> None:
        self.history.record("info", "fault", NEMESIS, value={"fault": name, "where": where})

    def heal(self, name: str, *, where: str = "client") -> None:
        self.history.record("info", "heal", NEMESIS, value={"fault": name, "where": where})

    def elapse(self, seconds: float) -> None:
        """Let ``seconds`` of real time pass in the history (its monotonic clock runs on)."""
        self.history._started -= seconds  # the history's time is monotonic time since then

    def clock(self, seconds: float) -> None:
        self.history.record("info", "clock", NEMESIS, value={"seconds": seconds})

    def crash(self) -> None:
        self.history.record("info", "crash", NEMESIS, value={"how": "hook:after-claim"})
        self.history.record("info", "restart", NEMESIS, value={"instance": 0})

    def store_size(self, rows: int) -> None:
        self.history.record("ok", "store-size", ORACLE, value={"rows": rows})

    def total(self, total: int) -> None:
        self.history.record("ok", "effects-total", ORACLE, value={"total": total})

    def exit(self, code: int, scenario: str) -> None:
        self.history.record("info", "exit", NEMESIS,
                            value={"instance": 0, "code": code, "scenario": scenario})

    def check(self, *properties: str, promises: Promises = REFERENCE_PROMISES,
              horizon: float = 86400.0, key: KeySpec | None = None,
              keyless: KeylessCounting = "exact",
              operations: tuple[tuple[str, str], ...] = (),
              handler_errors: Mapping[str, ErrorPolicy] | None = None,
              trust_moved_clock: bool | None = None) -> CheckResult:
        """Judge the story as ``run`` would (a jump trusted unless the lease is renewed, as
        ``CheckOptions.for_target`` decides), or as told."""
        trust = not promises.lease_renewed if trust_moved_clock is None else trust_moved_clock
        options = CheckOptions(promises, horizon, key or KeySpec(), keyless, operations,
                               handler_errors=handler_errors or {}, trust_moved_clock=trust)
        return check_history(self.history.events(), options, properties=list(properties) or None)


def replayed() -> dict[str, str]:
    return {"idempotent-replayed": "true", "content-type": "application/json"}


JSON = {"content-type": "application/json"}
