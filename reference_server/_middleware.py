"""The idempotency layer: one pure ASGI class at the outermost boundary of the service.

For a POST or PATCH it reads the key and the body, claims the key, and either answers from the
store (replay, 409, 422) or runs the handler with a ``PendingWork`` ledger, holding its whole
response, and commits the work and the response in one fenced transaction before sending it.
When the handler's work is all in the store (``local_work``) the two steps become one: the
handler runs first with its work held back, and the claim, the work and the response are
written in one transaction (a key already there drops the work and answers as above).
Another method sent with a key gets 422 if that key already holds a request (reusing a key
with another method is reuse), and otherwise passes through unclaimed; the rest passes through
untouched.  Per-request state lives in ``_Exchange``, built for each call (Starlette's GZip
responder pattern); the middleware itself holds its options and two small things shared by
requests (the waiting room, the memory of finished keys).

Order of checks, each answered before anything is stored: tenant (401), key (400), test
headers (400), body size (413), JSON (400); then the claim.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Literal

from reference_server._behaviour import CORRECT, Behaviour
from reference_server._bodies import BodyTooLarge, ClientGone, read_body, replaying
from reference_server._claims import (
    Claimed,
    ClaimOutcome,
    ClaimRequest,
    InProgress,
    Replay,
    Reuse,
    Verdict,
    check_then_claim,
    check_without_claim,
    claim_atomically,
    complete_atomically,
    judge,
)
from reference_server._clock import ServerClock
from reference_server._faults import (
    FaultPoint,
    FaultRequest,
    InvalidTestHeaders,
    crash,
    requested_faults,
)
from reference_server._fingerprint import InvalidJson, canonical_json, fingerprint
from reference_server._keys import KEY_HEADER, InvalidKey, parse_key
from reference_server._ledger import DirectLedger, PendingWork, with_ledger
from reference_server._model import Charge, StoredResponse
from reference_server._responses import (
    CapturedResponse,
    capture,
    error_response,
    send_captured,
    send_error,
    send_stored,
)
from reference_server._tenants import ANONYMOUS, InvalidAuthorization, tenant_of
from reference_server._types import ASGIApp, Message, Receive, Scope, Send
from reference_server.stores import Commit, Completion, Store, StoreUnavailable

__all__ = ["ErrorPolicy", "IdempotencyMiddleware", "InProgressPolicy", "Mode"]

logger = logging.getLogger(__name__)

Mode = Literal["strict", "lax"]
InProgressPolicy = Literal["conflict", "wait"]
ErrorPolicy = Literal["release", "store"]

# What the ``key-only`` flaw remembers instead of the response.
_ALREADY_PROCESSED = StoredResponse(
    200, (("content-type", "application/json"),), b'{"status":"already_processed"}'
)
_RETRY_AFTER = 1
_NO_FAULTS = FaultRequest()
# The layer's fixed answers, encoded once: 409s and 503s come in bursts (concurrent retries, an
# outage), and ``send_captured`` copies the headers, so one value serves every request.
_REUSE = error_response(422, "idempotency_key_reuse",
                        "this key was used for a different request")
_IN_PROGRESS = error_response(409, "in_progress",
                              "a request with this key is still running; retry later",
                              retry_after=_RETRY_AFTER)
_STORE_UNAVAILABLE = error_response(503, "store_unavailable", retry_after=_RETRY_AFTER)
_INTERNAL = error_response(500, "internal")


class IdempotencyMiddleware:
    """Idempotency keys for ``app``: claim, run once, store, replay.

    ``mode`` strict answers 400 to a request without a key, lax runs it unprotected.
    ``in_progress`` conflict answers 409 while another request holds the key; wait polls for
    its outcome up to ``wait_timeout`` seconds, with at most ``max_waiters`` requests waiting.
    ``errors`` release rolls back a raising handler's work and frees the key; store keeps its
    500 as the key's outcome.  ``behaviour`` carries the switches a named flaw flips.
    ``local_work`` says the handler's work is all writes through its ledger (no provider call,
    nothing outside the store): the key, the work and the response may then be written in one
    transaction after the handler ran, instead of a claim before it and a commit after.
    """

    def __init__(
        self,
        app: ASGIApp,
        store: Store,
        *,
        clock: ServerClock,
        mode: Mode = "strict",
        retention: float = 86400.0,
        lease: float = 30.0,
        in_progress: InProgressPolicy = "conflict",
        wait_timeout: float = 5.0,
        max_waiters: int = 64,
        errors: ErrorPolicy = "release",
        test_faults: bool = False,
        behaviour: Behaviour = CORRECT,
        methods: frozenset[str] = frozenset({"POST", "PATCH"}),
        local_work: bool = False,
    ) -> None:
        if mode not in ("strict", "lax"):
            raise ValueError(f"mode must be strict or lax, not {mode!r}")
        if in_progress not in ("conflict", "wait"):
            raise ValueError(f"in_progress must be conflict or wait, not {in_progress!r}")
        if errors not in ("release", "store"):
            raise ValueError(f"errors must be release or store, not {errors!r}")
        if min(retention, lease, wait_timeout) <= 0 or max_waiters < 0:
            raise ValueError("retention, lease and wait_timeout must be positive, "
                             "max_waiters not negative")
        self.app = app
        self.store = store
        self.clock = clock
        self.mode = mode
        self.retention = timedelta(seconds=behaviour.retention(retention))
        self.lease = timedelta(seconds=lease)
        self.in_progress = in_progress
        self.wait_timeout = wait_timeout
        self.errors = errors
        self.test_faults = test_faults
        self.behaviour = behaviour
        self.methods = methods
        # Decided once, not per request: see ``_Exchange._may_work_first``.
        self.works_first = local_work and behaviour == CORRECT
        self.waiting_room = _WaitingRoom(max_waiters)
        self.finished = _FinishedKeys()
        self.direct = DirectLedger(store)  # for lax mode's unkeyed requests; holds no state

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
        elif scope["method"] in self.methods:
            await _Exchange(self, scope, receive, send).run()
        elif any(name == KEY_HEADER for name, _ in scope["headers"]):
            await _Exchange(self, scope, receive, send).check_reuse()
        else:
            await self.app(scope, receive, send)


class _WaitingRoom:
    """Counts the requests waiting for another's outcome, so waiters cannot exhaust the server."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.occupied = 0


class _FinishedKeys:
    """The newest keys this process has seen finished, at most ``capacity`` of them.

    A hint for choosing the path, never for answering: a retry of a key known to be finished
    claims first, finds the stored response and replays it without running the handler for
    nothing.  A key finished by another process, forgotten here, or since expired takes the
    path it would have taken anyway; both paths are correct for a key in any state.
    """

    def __init__(self, capacity: int = 4096) -> None:
        self._capacity = capacity
        self._keys: dict[tuple[str, str], None] = {}  # insertion order: the oldest first

    def __contains__(self, key: tuple[str, str]) -> bool:
        return key in self._keys

    def add(self, key: tuple[str, str]) -> None:
        if key in self._keys:
            return
        if len(self._keys) >= self._capacity:
            del self._keys[next(iter(self._keys))]
        self._keys[key] = None


@dataclass(frozen=True, slots=True)
class _KeyedRequest:
    tenant: str  # the tenant the key belongs to (all one tenant under ``no-tenant-scope``)
    key: str  # the key as stored (a made-up one under ``server-generated-key``)
    client_key: str  # the key as the client sent it: origin metadata for the ledger
    fingerprint: str
    faults: FaultRequest


class _Exchange:
    """One governed request, from its headers to its one response."""

    def __init__(
        self, layer: IdempotencyMiddleware, scope: Scope, receive: Receive, send: Send
    ) -> None:
        self.layer = layer
        self.scope = scope
        self.receive = receive
        self._downstream = send
        self.responded = False

    async def send(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self.responded = True
        await self._downstream(message)

    async def run(self) -> None:
        """A method the layer claims keys for: the whole protocol."""
        await self._answering_failures(self._run)

    async def check_reuse(self) -> None:
        """Another method (GET, PUT, DELETE...) sent with a key: 422 if the key holds a
        request, which is necessarily a different one (P4); otherwise the request passes."""
        await self._answering_failures(self._check_reuse)

    async def _answering_failures(self, step: Callable[[], Awaitable[None]]) -> None:
        try:
            await step()
        except ClientGone:
            logger.info("the client left before sending its body")
        except StoreUnavailable as exc:
            await self._answer_unavailable(exc)

    async def _answer_unavailable(self, exc: StoreUnavailable) -> None:
        """503, unless an answer has gone out already (``ack-before-commit``)."""
        logger.warning("store unavailable: %s", exc)
        if not self.responded:
            await send_captured(self.send, _STORE_UNAVAILABLE)

    async def _run(self) -> None:
        layer, headers = self.layer, self.scope["headers"]
        try:
            tenant = tenant_of(headers)
        except InvalidAuthorization as exc:
            return await send_error(self.send, 401, "invalid_authorization", str(exc))
        key_values = [value for name, value in headers if name == KEY_HEADER]
        client_key: str | None = None
        if key_values:
            try:
                client_key = parse_key(key_values)
            except InvalidKey as exc:
                return await send_error(self.send, 400, "idempotency_key_invalid", str(exc))
        elif layer.mode == "strict":
            return await send_error(self.send, 400, "idempotency_key_missing")
        faults = _NO_FAULTS
        if layer.test_faults:
            try:
                faults = requested_faults(self.scope)
            except InvalidTestHeaders as exc:
                return await send_error(self.send, 400, "invalid_test_headers", str(exc))
        try:
            body = await read_body(self.scope, self.receive)
        except BodyTooLarge:
            return await send_error(self.send, 413, "body_too_large")
        try:
            canonical = canonical_json(body)
        except InvalidJson as exc:
            return await send_error(self.send, 400, "invalid_json", str(exc))
        if client_key is None:
            return await self._run_unkeyed(replaying(body, self.receive))
        await self._run_keyed(self._keyed(tenant, client_key, canonical, faults), body)

    async def _check_reuse(self) -> None:
        headers = self.scope["headers"]
        try:
            tenant = tenant_of(headers)
            client_key = parse_key([value for name, value in headers if name == KEY_HEADER])
        except InvalidAuthorization as exc:
            return await send_error(self.send, 401, "invalid_authorization", str(exc))
        except InvalidKey as exc:
            return await send_error(self.send, 400, "idempotency_key_invalid", str(exc))
        request = self._keyed(tenant, client_key, b"", _NO_FAULTS)
        record = await self.layer.store.lookup(request.tenant, request.key)
        if judge(record, await self._claim_request(request)) is Verdict.REUSE:
            return await send_captured(self.send, _REUSE)
        await self.layer.app(self.scope, self.receive, self.send)

    def _keyed(
        self, tenant: str, client_key: str, canonical: bytes, faults: FaultRequest
    ) -> _KeyedRequest:
        """The request as the key table sees it, the flaws' switches applied."""
        behaviour = self.layer.behaviour
        return _KeyedRequest(
            tenant=tenant if behaviour.tenant_scope else ANONYMOUS,
            key=client_key if behaviour.client_key else f"srv_{uuid.uuid4().hex}",
            client_key=client_key,
            fingerprint=fingerprint(
                self.scope["method"], self.scope["path"],
                canonical if behaviour.hash_body else b"",
            ),
            faults=faults,
        )

    async def _run_unkeyed(self, receive: Receive) -> None:
        """Lax mode without a key: the handler runs unprotected, its charges written at once."""
        scope = with_ledger(self.scope, self.layer.direct)
        try:
            response = await capture(self.layer.app, scope, receive)
        except StoreUnavailable:
            raise
        except Exception:
            logger.exception("the handler failed on a request without a key")
            response = _INTERNAL
        await send_captured(self.send, response)

    # -- claiming -------------------------------------------------------------------------

    async def _claim_request(self, request: _KeyedRequest) -> ClaimRequest:
        layer = self.layer
        return ClaimRequest(
            tenant=request.tenant,
            key=request.key,
            fingerprint=request.fingerprint,
            now=await layer.clock.now(),
            lease=layer.lease,
            retention=layer.retention,
            lease_recovery=layer.behaviour.lease_recovery,
        )

    async def _claim(self, request: _KeyedRequest) -> ClaimOutcome | None:
        """The claim outcome, or ``None`` for "run unclaimed" (``insert-after-work``)."""
        layer = self.layer
        claim = await self._claim_request(request)
        style = layer.behaviour.claim
        if style == "atomic":
            return await claim_atomically(layer.store, claim)
        if style == "check-then-insert":
            return await check_then_claim(layer.store, claim)
        return await check_without_claim(layer.store, claim)

    async def _wait(self, request: _KeyedRequest) -> ClaimOutcome | None:
        """``--in-progress wait``: poll until the key settles, the wait times out or is full."""
        room = self.layer.waiting_room
        if room.occupied >= room.capacity:
            return InProgress()
        room.occupied += 1
        try:
            loop = asyncio.get_running_loop()
            deadline = loop.time() + self.layer.wait_timeout
            pause = 0.01
            while (remaining := deadline - loop.time()) > 0:
                await asyncio.sleep(min(pause, remaining))
                outcome = await self._claim(request)
                if not isinstance(outcome, InProgress):
                    return outcome
                pause = min(pause * 2, 0.2)
            return InProgress()
        finally:
            room.occupied -= 1

    async def _run_keyed(self, request: _KeyedRequest, body: bytes) -> None:
        if self._may_work_first(request):
            outcome = await self._work_then_claim(request, body)
            if outcome is None:  # done: the key, the work and the response were written
                return
        else:
            outcome = await self._claim(request)
        if isinstance(outcome, InProgress) and self.layer.in_progress == "wait":
            outcome = await self._wait(request)
        if isinstance(outcome, Reuse):
            await send_captured(self.send, _REUSE)
        elif isinstance(outcome, InProgress):
            await send_captured(self.send, _IN_PROGRESS)
        elif isinstance(outcome, Replay):
            self.layer.finished.add((request.tenant, request.key))
            await send_stored(self.send, outcome.response)
        else:
            token = None if outcome is None else outcome.token
            await self._execute(request, token, replaying(body, self.receive))

    def _may_work_first(self, request: _KeyedRequest) -> bool:
        """One transaction for the claim, the work and the response (the seed's step 3) when
        the handler's work is all writes to the store (``local_work``): nothing then happens
        outside the store that a claim must come before.  A request that asks for a fault is
        about the phases of the protocol (a crash after the claim, a handler that outlives its
        lease), so it takes them; and each named flaw is one deviation in those phases, so a
        flawed server always does.  A key this process has seen finished is claimed first too
        (``_FinishedKeys``): its retry is a replay, which needs no work."""
        return (self.layer.works_first and request.faults == _NO_FAULTS
                and (request.tenant, request.key) not in self.layer.finished)

    async def _work_then_claim(self, request: _KeyedRequest, body: bytes) -> ClaimOutcome | None:
        """Run the handler with its work held back, then claim the key with the work and the
        response in the same transaction.  ``None`` once that has committed and the response
        is sent; otherwise the claim's outcome (a replay, 409 or 422), the work dropped.

        A handler that raises falls back to the two phases: what its failure means depends on
        the key (a replay if the key is complete, else the ``errors`` policy), so the key is
        claimed on its own and, if the claim takes, the handler runs again under it.
        """
        layer = self.layer
        work = PendingWork()
        try:
            response = await capture(layer.app, with_ledger(self.scope, work),
                                     replaying(body, self.receive))
        except StoreUnavailable:
            raise
        except Exception:
            logger.info("the handler failed before its claim (key %r): claiming first instead",
                        request.key)
            return await claim_atomically(layer.store, await self._claim_request(request))
        outcome = await complete_atomically(layer.store, Completion(
            claim=await self._claim_request(request),
            response=response.stored(),
            charges=work.charges,
            client_key=request.client_key,
        ))
        if not isinstance(outcome, Claimed):
            return outcome
        layer.finished.add((request.tenant, request.key))
        await send_captured(self.send, response)
        return None

    # -- running and committing -----------------------------------------------------------

    async def _execute(self, request: _KeyedRequest, token: int | None, receive: Receive) -> None:
        """Run the handler under the claim ``token`` and commit its outcome with the fence."""
        layer = self.layer
        if request.faults.fault is FaultPoint.CRASH_AFTER_CLAIM:
            crash(FaultPoint.CRASH_AFTER_CLAIM)
        work = PendingWork()
        try:
            response = await capture(layer.app, with_ledger(self.scope, work), receive)
        except StoreUnavailable as exc:
            return await self._unavailable(request, token, exc)
        except Exception:
            logger.exception("the handler failed (key %r, --errors %s)", request.key,
                             layer.errors)
            if layer.errors == "release":
                await self._release(request, token)
                return await send_captured(self.send, _INTERNAL)
            response, work = _INTERNAL, PendingWork()
        if not layer.behaviour.commit_before_ack:
            await send_captured(self.send, response)
        try:
            committed = await self._commit(request, token, response, work)
        except StoreUnavailable as exc:
            return await self._unavailable(request, token, exc)
        if request.faults.fault is FaultPoint.CRASH_BEFORE_RESPONSE:
            crash(FaultPoint.CRASH_BEFORE_RESPONSE)
        if self.responded:
            return
        if committed:
            await send_captured(self.send, response)
        else:
            await self._answer_fenced(request)

    async def _commit(
        self, request: _KeyedRequest, token: int | None, response: CapturedResponse,
        work: PendingWork,
    ) -> bool:
        """Store the response and the work together; False if the fence no longer holds."""
        layer, behaviour = self.layer, self.layer.behaviour
        stored = response.stored() if behaviour.store_response else _ALREADY_PROCESSED
        if token is None:  # insert-after-work: the key is written only now
            token = await layer.store.claim_unchecked(await self._claim_request(request))
        charges: Sequence[Charge] = work.charges
        if not behaviour.single_commit:  # split-commit: the work first, on its own
            await layer.store.record_charges(charges, request.client_key)
            charges = ()
        if request.faults.fault is FaultPoint.CRASH_AFTER_WORK:
            crash(FaultPoint.CRASH_AFTER_WORK)
        committed = await layer.store.commit(Commit(
            tenant=request.tenant,
            key=request.key,
            token=token if behaviour.fencing else None,
            response=stored,
            charges=charges,
            client_key=request.client_key,
        ))
        if not committed:
            logger.warning("lost the fence on key %r: another claim took it over; the work "
                           "is discarded", request.key)
        return committed

    async def _answer_fenced(self, request: _KeyedRequest) -> None:
        """A late original: replay the winner's outcome if it is there, else 409."""
        record = await self.layer.store.lookup(request.tenant, request.key)
        if (record is not None and record.response is not None
                and record.fingerprint == request.fingerprint):
            return await send_stored(self.send, record.response)
        await send_error(self.send, 409, "in_progress",
                         "this request's claim on the key expired and another took it over",
                         retry_after=_RETRY_AFTER)

    async def _unavailable(self, request: _KeyedRequest, token: int | None,
                           exc: StoreUnavailable) -> None:
        """The store failed under a claim: answer 503 first, then try to free the key.  The
        store that just failed may take its whole deadline to refuse the release too, and the
        client should not wait for that; until the release lands (or the lease runs out) a
        retry is told 409, in progress."""
        await self._answer_unavailable(exc)
        await self._release(request, token)

    async def _release(self, request: _KeyedRequest, token: int | None) -> None:
        """Free the key for a retry; if the store cannot, the lease frees it later."""
        if token is None:
            return
        try:
            await self.layer.store.release(request.tenant, request.key, token)
        except StoreUnavailable as exc:
            logger.warning("could not release key %r (%s): it stays claimed until its lease "
                           "runs out", request.key, exc)
