"""A read-only view of a history that the properties share.

Attempts paired with their completions, the target's clock, effects per key, crashes and
faults.

Times here are target times: the history's monotonic time plus every clock advance recorded
before it, because retention and leases run on the target's clock, not on ours.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from harness._history import Event
from harness._target import LEASE_SLACK, ErrorPolicy, Promises

__all__ = ["COPIES_MET", "Attempt", "EffectsSeen", "Identity", "View", "copies_met",
           "describe_identity", "is_final", "past_the_lease"]

Identity = tuple[str | None, str | None]


def describe_identity(identity: Identity) -> str:
    tenant, key = identity
    shown = "(no key)" if key is None else key
    return shown if tenant is None else f"{tenant}/{shown}"


@dataclass(frozen=True, slots=True)
class Attempt:
    invoke: Event
    completion: Event | None
    start: float
    end: float | None

    @property
    def identity(self) -> Identity:
        return (self.invoke.tenant, self.invoke.key)

    @property
    def status(self) -> int | None:
        return self.completion.status if self.completion else None

    @property
    def end_time(self) -> float:
        """History time of the completion; infinity for an attempt that never completed."""
        return self.completion.time if self.completion else float("inf")

    @property
    def ok(self) -> bool:
        return self.status is not None and 200 <= self.status < 300

    @property
    def answered(self) -> bool:
        return self.status is not None

    @property
    def label(self) -> str:
        return self.invoke.label or ""

    @property
    def resource(self) -> str | None:
        return self.completion.resource if self.completion else None

    @property
    def digest(self) -> str | None:
        return self.completion.body_digest if self.completion else None

    @property
    def headers(self) -> Mapping[str, str] | None:
        """The answer's meaningful headers, as recorded; None without an answer."""
        return self.completion.headers if self.completion else None

    def header(self, name: str) -> str | None:
        wanted = name.lower()
        return next((v for k, v in (self.headers or {}).items() if k.lower() == wanted), None)

    @property
    def indices(self) -> tuple[int, ...]:
        return (self.invoke.index,) + ((self.completion.index,) if self.completion else ())

    def describe(self) -> str:
        """``attempt 2: 201 (ch_x)`` or ``attempt 1: no answer (timeout)``."""
        head = f"attempt {self.invoke.attempt or '?'}"
        if self.completion is None:
            return f"{head}: never completed"
        if self.status is None:
            return f"{head}: no answer ({self.completion.error})"
        resource = f" ({self.resource})" if self.resource else ""
        return f"{head}: {self.status}{resource}"


@dataclass(frozen=True, slots=True)
class EffectsSeen:
    count: int | None
    ids: tuple[str, ...] | None
    index: int
    error: str | None = None


class View:
    """Everything the properties read, computed once per history."""

    def __init__(self, events: Sequence[Event]) -> None:
        self.events = tuple(events)
        self._clock_times: list[float] = []
        self._clock_offsets: list[float] = []
        offset = 0.0
        for event in self.events:
            if event.f == "clock":
                offset += float(event.value.get("seconds", 0.0))
                self._clock_times.append(event.time)
                self._clock_offsets.append(offset)

        completions = {e.op: e for e in self.events if e.f == "request" and e.type != "invoke"}
        self.attempts: list[Attempt] = []
        for event in self.events:
            if event.f == "request" and event.type == "invoke":
                done = completions.get(event.op)
                self.attempts.append(Attempt(
                    event, done, self.target_time(event),
                    self.target_time(done) if done else None,
                ))
        self.by_identity: dict[Identity, list[Attempt]] = defaultdict(list)
        for attempt in self.attempts:
            self.by_identity[attempt.identity].append(attempt)

        self.effects: dict[Identity, EffectsSeen] = {}
        #: Each identity's counts in history order, as (event index, count): ``counted_before``.
        self._counts: dict[Identity, list[tuple[int, int]]] = defaultdict(list)
        for event in self.events:
            if event.f == "effects" and event.type == "ok":
                self._counts[(event.tenant, event.key)].append(
                    (event.index, int(event.value.get("count") or 0)))
            if event.f == "effects":
                ids = event.value.get("ids")
                self.effects[(event.tenant, event.key)] = EffectsSeen(
                    event.value.get("count") if event.type == "ok" else None,
                    tuple(ids) if isinstance(ids, list) else None,
                    event.index,
                    event.error,
                )
        self.totals = [e for e in self.events if e.f == "effects-total"]
        self.exits = [e for e in self.events if e.f == "exit"]
        self.crashes = [e for e in self.events if e.f == "crash"]
        self.restarts = [e for e in self.events if e.f == "restart"]
        self.nemesis = [e for e in self.events if e.f in ("crash", "restart", "clock")]
        self.jumps = [e for e in self.events if e.f == "clock"]
        #: The writes the store proxy saw a watched request commit (``store-write``).
        self.store_writes = [e for e in self.events if e.f == "store-write"]
        self.fault_windows = self._fault_windows()
        self.store_sizes = [e for e in self.events if e.f == "store-size" and e.type == "ok"]
        self.has_clock_advance = bool(self._clock_times)
        #: The first restart after which nothing says where the target's clock stood (a test
        #: clock moved by the harness, and a target file with neither ``read`` nor
        #: ``restart_resets``): from then on the harness's account of the target's time may
        #: run ahead of the target's own.
        self.clock_lost = next((e for e in self.restarts
                                if e.value.get("clock") == "unknown"), None)

    def spans_lost_clock(self, indices: Sequence[int], *, keyless: bool = False) -> bool:
        """Does evidence (history indices) reach from before the restart that lost the
        target's clock to after it, so that what it says about elapsed time rests on the
        harness's account alone?  ``keyless`` evidence (a table's size) is about every key:
        it spans when any key was used before that restart."""
        lost = self.clock_lost
        if lost is None:
            return False
        cited = set(indices)
        times = [e.time for e in self.events if e.index in cited]
        if not times or max(times) <= lost.time:
            return False
        return min(times) < lost.time or (keyless and any(
            a.invoke.time < lost.time for a in self.attempts if a.invoke.key is not None))

    def lost_clock_reason(self) -> str:
        """Why elapsed time after the restart cannot be judged, naming what to declare."""
        lost = self.clock_lost
        why = str(lost.value.get("clock_reason", "")) if lost is not None else ""
        why = why.split(": declare", 1)[0]  # what to declare is said once, below
        return ("the target's clock is unknown after it restarted"
                + (f" ({why})" if why else "")
                + ": the harness's account of its time may run ahead of the target's, so "
                "nothing that rests on elapsed time since then can be judged; declare "
                "[hooks.clock] read (a path answering the target's time) or restart_resets "
                "(true: a restart resets the clock; false: it keeps it) in the target file")

    def counted_before(self, identity: Identity, index: int) -> int:
        """``identity``'s effects as last counted before event ``index`` (0 if never): what
        an incident starting there cannot have caused."""
        counts = self._counts.get(identity, [])
        earlier = bisect_left(counts, (index,))
        return counts[earlier - 1][1] if earlier else 0

    def clock_offset(self, time: float) -> float:
        """Seconds the target's clock had been advanced by at history time ``time``."""
        position = bisect_right(self._clock_times, time)
        return self._clock_offsets[position - 1] if position else 0.0

    def target_time(self, event: Event) -> float:
        return event.time + self.clock_offset(event.time)

    def jumps_during(self, attempt: Attempt) -> list[Event]:
        """Clock jumps made while ``attempt`` was in flight: its own timers (a lease renewal, a
        heartbeat) saw none of that time pass."""
        return [j for j in self.jumps if attempt.invoke.time < j.time < attempt.end_time]

    def ran_on_the_server_until(self, attempt: Attempt) -> float:
        """History time until which the server may still have run ``attempt``.  An answer
        ends it; a request left without one (a timeout, a lost connection) may still wait in
        the server's queue or run there after the client gave up, until the target dies."""
        if attempt.answered:
            return attempt.end_time
        return min((c.time for c in self.crashes if c.time > attempt.invoke.time),
                   default=float("inf"))

    def jumped_between(self, first: float, last: float) -> bool:
        """Was the clock moved between two history times?"""
        return any(first < j.time < last for j in self.jumps)

    def moved_while_running(self, indices: Sequence[int]) -> tuple[int, ...]:
        """The clock jumps made before the last of ``indices`` (a finding's evidence) while a
        request of a key they are about was still in flight: evidence a jump made, that real
        time might not.  Every request of those keys counts, cited or not: a jump that expires
        a running original's claim lets the key be taken while it runs, and the charges that
        follow fall in the next window, where the finding cites only the later requests
        (fresh_validation, explored under CI: P2 cited a burst's answers and the retries that
        replayed the original's late charge, not the original).  A request left without an
        answer counts as running until the target died (redis_store, explored under CI: six
        copies timed out under load, the clock jumped past the retention, and a copy the server
        reached only then found the key expired and charged anew)."""
        cited = set(indices)
        evidence = [e for e in self.events if e.index in cited]
        if not evidence:
            return ()
        last = max(e.time for e in evidence)
        keys = {(e.tenant, e.key) for e in evidence if e.key is not None}
        attempts = [a for key in keys for a in self.by_identity.get(key, [])]
        return tuple(sorted({
            j.index for a in attempts for j in self.jumps
            if a.invoke.time < j.time < min(last, self.ran_on_the_server_until(a))}))

    def keyed(self) -> list[tuple[Identity, list[Attempt]]]:
        """Identities that carried a real key (not keyless, not hostile), in first-use order."""
        return [
            (identity, attempts) for identity, attempts in self.by_identity.items()
            if identity[1] is not None and not attempts[0].label.startswith("hostile")
        ]

    def keyless_charges(self, attempt: Attempt) -> tuple[int | None, str, tuple[int, ...]]:
        """What one keyless request charged, from the totals counted just before and just after
        it: the count (None when it cannot be told), why not, and the totals' indices.  The
        difference only counts when no other request ran between the two totals."""
        before = next((e for e in reversed(self.totals) if e.time <= attempt.invoke.time), None)
        after = next((e for e in self.totals if e.time >= attempt.end_time), None)
        if before is None or after is None:
            return None, "no total was counted around it", ()
        if before.type != "ok" or after.type != "ok":
            failed = before if before.type != "ok" else after
            return None, f"the total could not be counted: {failed.error}", ()
        overlapping = [a for a in self.attempts if a is not attempt
                       and a.invoke.time < after.time and a.end_time > before.time]
        if overlapping:
            return None, (f"{len(overlapping)} other request(s) ran while it did, so the "
                          "difference of the totals is not its own"), ()
        delta = int(after.value["total"]) - int(before.value["total"])
        return delta, "", (before.index, after.index)

    def lease_not_waited(self) -> str | None:
        """Why a generator could not wait for the promised lease, when it said so."""
        reasons = [str(e.value.get("reason", "")) for e in self.events
                   if e.f == "lease-not-waited"]
        return "; ".join(r for r in reasons if r) or None

    def epochs(self, attempts: list[Attempt], retention: float | None) -> list[list[Attempt]]:
        """Split a key's attempts where the retention window ran out: each epoch may execute
        once.  Without a promised retention the key never expires."""
        epochs: list[list[Attempt]] = []
        epoch_start = None
        for attempt in attempts:
            if epoch_start is None or (
                retention is not None and attempt.start - epoch_start > retention
            ):
                epochs.append([])
                epoch_start = attempt.start
            epochs[-1].append(attempt)
        return epochs

    def _fault_windows(self) -> list[tuple[Event, Event | None]]:
        """Each injected fault with the heal that ended it (None: still active at the end)."""
        windows: list[tuple[Event, Event | None]] = []
        open_faults: dict[tuple[str, object], int] = {}
        for event in self.events:
            name = (str(event.value.get("fault")), event.value.get("instance"))
            if event.f == "fault":
                open_faults[name] = len(windows)
                windows.append((event, None))
            elif event.f == "heal" and name in open_faults:
                position = open_faults.pop(name)
                windows[position] = (windows[position][0], event)
        return windows

    def nemesis_during(self, first: float, last: float) -> tuple[int, ...]:
        """Nemesis events that acted between two history times: faults whose window overlaps,
        and crashes, restarts and clock jumps inside it."""
        indices = [e.index for e in self.nemesis if first <= e.time <= last]
        for fault, heal in self.fault_windows:
            if fault.time <= last and (heal is None or heal.time >= first):
                indices.append(fault.index)
                if heal is not None:
                    indices.append(heal.index)
        return tuple(sorted(indices))

    def faults_during(self, attempt: Attempt, *, where: str | None = None) -> list[str]:
        """Names of the faults active while ``attempt`` ran (only those on the ``where`` link,
        ``client`` or ``store``, when given)."""
        end = attempt.completion.time if attempt.completion else float("inf")
        return [
            str(fault.value.get("fault")) for fault, heal in self.fault_windows
            if fault.time <= end and (heal is None or heal.time >= attempt.invoke.time)
            and (where is None or fault.value.get("where", "client") == where)
        ]

    def store_failed(self, attempt: Attempt) -> bool:
        """Was this a 5xx answered while the harness faulted the store?  That error is the
        failing store's, not the handler's: never the operation's stored answer, whatever
        ``errors`` says (a library that stores its handler's errors could not store this one),
        so a client retries it."""
        return (attempt.status is not None and attempt.status >= 500
                and bool(self.faults_during(attempt, where="store")))

    def evidence(self, attempts: Sequence[Attempt], *extra: int) -> tuple[int, ...]:
        """The attempts' events, the faults that acted while they ran, the store writes of
        their keys, and ``extra`` indices."""
        indices: set[int] = set(extra)
        identities = {attempt.identity for attempt in attempts}
        indices.update(e.index for e in self.store_writes if e.identity in identities)
        times: list[float] = []
        for attempt in attempts:
            indices.update(attempt.indices)
            times.append(attempt.invoke.time)
            if attempt.completion is not None:
                times.append(attempt.completion.time)
        if times:
            indices.update(self.nemesis_during(min(times), max(times)))
        return tuple(sorted(indices))


def is_final(event: Event, promises: Promises, *, errors: ErrorPolicy | None = None) -> bool:
    """Did this attempt get an answer a client stops retrying on?

    No answer, an in-progress status, 429, 503 and (unless the target stores errors) other 5xx
    are all "try again later".  ``errors`` is the policy of the fault that failed this key's
    handler, where it differs from ``promises.errors``.
    """
    status = event.status
    if status is None:
        return False
    if promises.says_in_progress(status) or status in (429, 503):
        return False
    return not (status >= 500 and (errors or promises.errors) == "release")


#: The precondition a scenario names when it sends copies of one request together to test
#: the claim (``ScenarioContext.intend``): that at least two of them ran at the same time.
COPIES_MET = "copies-met"


def copies_met(answers: Iterable[Event], promises: Promises) -> bool:
    """Did copies of one request run at the server at the same time, by their answers?  A
    copy told the key is in progress met a running one; copies that charged apart (two
    resources) ran unclaimed side by side.  One charge replayed to every other copy shows
    nothing: each may have come after the one before had finished.  Readable only where
    the target answers a running key with a status (``in_progress = "conflict"``)."""
    seen = list(answers)
    return (any(promises.says_in_progress(a.status) for a in seen)
            or len({a.resource for a in seen if a.resource}) > 1)


def past_the_lease(lease: float | None, *, since: float, at: float) -> bool:
    """Has the promised ``lease`` run out between the target times ``since`` (an incident, a
    claim) and ``at`` (a retry, the drain)?  Past it by more than ``LEASE_SLACK``: the target's
    lease clock and the harness's are not the same clock.  Until then a claim made at ``since``
    may still hold its key, so a key in progress is not stuck yet; a lease never promised never
    runs out.  The one place every judge (an HTTP service's P5 and P9, a consumer's P9 and P10)
    asks it."""
    return lease is not None and at > since + lease + LEASE_SLACK
