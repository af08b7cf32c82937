"""One message, start to finish: the seed's rule for background workers.

    deliver ─> read the dedup key and the charge ─(poison)─> dead-letter, no effect
       └─> claim the key (atomic, with a lease)
             ├─ done already ─────────────────────> ack, no work (a duplicate)
             ├─ claimed by a live consumer ───────> wait, look again (until done or lease over)
             ├─ same key, another body ───────────> dead-letter, no effect
             └─ ours ─> work ─> commit charge + key as done, one transaction ─> ack

The ack goes out only after the commit, so a crash or a lost ack means a redelivery, which
finds the key done and acks without work.  Nothing is acked or dead-lettered on a guess: when
the store cannot be reached the message is held and the store tried again; when the outcome of
a commit is unknown the message is requeued, and its redelivery finds out.  A message whose
work keeps failing, or that was delivered ``max_attempts`` times without an outcome (a consumer
that dies on it), is dead-lettered.

The flaws (``ConsumerBehaviour``) change one step each; the events say what happened, in order.
"""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
from datetime import timedelta
from typing import Protocol

from reference_server._claims import (
    Claimed,
    ClaimOutcome,
    ClaimRequest,
    InProgress,
    Replay,
    Reuse,
    check_then_claim,
    check_without_claim,
    claim_atomically,
)
from reference_server._clock import ServerClock
from reference_server._model import Charge, StoredResponse
from reference_server.consumer._behaviour import ConsumerBehaviour
from reference_server.consumer._events import EventLog
from reference_server.consumer._messages import (
    Delivery,
    Job,
    PausePoint,
    Poison,
    read_job,
)
from reference_server.consumer._settings import ConsumerSettings
from reference_server.stores import Commit, Store, StoreUnavailable

__all__ = ["TENANT", "Settlement", "Worker"]

logger = logging.getLogger(__name__)

TENANT = ""  # messages carry no tenant: every key belongs to the anonymous tenant
_STORE_RETRY_CAP = 2.0


class Settlement(Protocol):
    """How the worker answers the broker for one delivery; each returns False when the channel
    it came on is gone (the broker will deliver the message again)."""

    @property
    def open(self) -> bool: ...

    @property
    def ack_event(self) -> str:
        """The event a successful ``ack`` is reported as: ``ack`` (AMQP), ``offset-commit``
        (Kafka)."""

    async def ack(self) -> bool: ...

    async def requeue(self) -> bool: ...

    async def dead_letter(self, reason: str = "") -> bool:
        """Move the message where poison goes; ``reason`` travels with it where the broker
        allows (a Kafka header)."""


class _WorkFailed(Exception):
    """The work raised: a transient failure, retried up to ``max_attempts``."""


class Worker:
    def __init__(
        self, store: Store, clock: ServerClock, *, settings: ConsumerSettings,
        behaviour: ConsumerBehaviour, events: EventLog,
    ) -> None:
        self._store = store
        self._clock = clock
        self._settings = settings
        self._behaviour = behaviour
        self._events = events
        self._retention = timedelta(seconds=behaviour.retention(settings.retention))
        self._lease = timedelta(seconds=settings.lease)
        self._remembered: set[str] = set()  # the dedup-in-memory flaw's whole dedup table

    async def handle(self, delivery: Delivery, settle: Settlement) -> None:
        """Process one delivery and settle it; never raises for anything a message contains."""
        try:
            job: Job | Poison = read_job(
                delivery, dedup_header=self._settings.dedup_header,
                key_from_header=self._behaviour.key_from_header,
                test_faults=self._settings.test_faults,
                dedup_source=self._settings.dedup_source,
                dedup_field=self._settings.dedup_field,
                message_id_fallback=self._settings.broker == "rabbitmq",
            )
        except Poison as exc:
            job = exc
        key = job.key if isinstance(job, Poison) else job.origin_key
        self._events.record("deliver", key=key, message_id=delivery.message_id,
                            redelivered=delivery.redelivered,
                            delivery_count=delivery.delivery_count,
                            **(delivery.event_fields or {}))
        if self._behaviour.ack == "before-work" and not await self._ack(settle, key, "received"):
            return
        if isinstance(job, Poison):
            await self._poison(settle, key, str(job))
            return
        try:
            if self._behaviour.dedup == "none":
                await self._work_unclaimed(job, settle, delivery)
            elif self._behaviour.dedup == "after-work":
                await self._work_then_record_key(job, settle, delivery)
            elif self._behaviour.dedup == "memory":
                await self._work_remembered(job, settle, delivery)
            else:
                await self._claim_then_work(job, settle, delivery)
        except _WorkFailed as exc:
            await self._failed(settle, job.origin_key, str(exc), delivery)
        except StoreUnavailable as exc:  # the commit's outcome is unknown: ask again later
            self._events.record("store-unavailable", key=job.origin_key, reason=str(exc))
            await self._requeue(settle, job.origin_key, "the store failed during the commit")
        except Exception as exc:  # a bug here must not strand the message unacked
            logger.exception("processing the message with key %s failed", job.origin_key)
            await self._failed(settle, job.origin_key, f"{type(exc).__name__}: {exc}", delivery)

    # -- the correct path, and the two racy claims ------------------------------------------

    async def _claim_then_work(self, job: Job, settle: Settlement, delivery: Delivery) -> None:
        outcome = await self._claim(job, settle)
        if outcome is None:
            return  # the channel closed while we waited: the broker delivers it again
        if isinstance(outcome, Replay):
            await self._ack(settle, job.origin_key, "duplicate")
            return
        if isinstance(outcome, Reuse):
            await self._dead_letter(settle, job.origin_key,
                                    "the dedup key was used before for another body")
            return
        assert isinstance(outcome, Claimed)
        self._events.record("claim", key=job.origin_key, token=outcome.token)
        if await self._exhausted(job, settle, delivery):
            await self._store.release(TENANT, job.key, outcome.token)
            return
        try:
            charge = await self._work(job)
        except _WorkFailed:
            await self._store.release(TENANT, job.key, outcome.token)
            raise
        committed = await self._store.commit(Commit(
            tenant=TENANT, key=job.key, token=outcome.token, response=_response(charge),
            charges=[charge], client_key=job.origin_key,
        ))
        if not committed:  # another consumer took the key over after our lease ran out
            self._events.record("fenced", key=job.origin_key, charge=charge.id)
            await self._requeue(settle, job.origin_key, "the lease ran out before the commit")
            return
        await self._committed(job, charge, settle)

    async def _claim(self, job: Job, settle: Settlement) -> ClaimOutcome | None:
        """Claim the key; hold the message while another consumer's claim is live, or while
        the store is unreachable.  ``None`` if the channel closed meanwhile."""
        announced: set[str] = set()
        delay = self._settings.requeue_delay
        while True:
            try:
                outcome = await self._claim_once(job)
            except StoreUnavailable as exc:
                if "store" not in announced:
                    announced.add("store")
                    self._events.record("store-unavailable", key=job.origin_key,
                                        reason=str(exc))
                delay = min(delay * 2, _STORE_RETRY_CAP)
            else:
                if not isinstance(outcome, InProgress):
                    return outcome
                if "wait" not in announced:
                    announced.add("wait")
                    self._events.record("wait", key=job.origin_key,
                                        reason="another consumer holds the key")
                delay = self._settings.requeue_delay
            if not settle.open:
                return None
            await asyncio.sleep(delay)

    async def _claim_once(self, job: Job) -> ClaimOutcome:
        request = await self._request(job)
        if self._behaviour.dedup == "check-then-insert":
            return await check_then_claim(self._store, request)
        return await claim_atomically(self._store, request)

    # -- the flawed paths -------------------------------------------------------------------

    async def _work_unclaimed(self, job: Job, settle: Settlement, delivery: Delivery) -> None:
        """Flaw ``no-dedup``: every delivery does the job."""
        if await self._exhausted(job, settle, delivery):
            return
        charge = await self._work(job)
        await self._store.record_charges([charge], job.origin_key)
        await self._committed(job, charge, settle)

    async def _work_then_record_key(
        self, job: Job, settle: Settlement, delivery: Delivery,
    ) -> None:
        """Flaw ``dedup-after-work``: look, work and commit, then write the key on its own."""
        request = await self._request(job)
        seen = await check_without_claim(self._store, request)
        if isinstance(seen, Replay):
            await self._ack(settle, job.origin_key, "duplicate")
            return
        if await self._exhausted(job, settle, delivery):
            return
        charge = await self._work(job)
        await self._store.record_charges([charge], job.origin_key)
        token = await self._store.claim_unchecked(request)
        await self._store.commit(Commit(tenant=TENANT, key=job.key, token=token,
                                        response=_response(charge), charges=(),
                                        client_key=job.origin_key))
        await self._committed(job, charge, settle)

    async def _work_remembered(self, job: Job, settle: Settlement, delivery: Delivery) -> None:
        """Flaw ``dedup-in-memory``: the keys this process finished, in a set of its own."""
        if job.key in self._remembered:
            await self._ack(settle, job.origin_key, "duplicate")
            return
        if await self._exhausted(job, settle, delivery):
            return
        self._events.record("claim", key=job.origin_key, token=0)
        charge = await self._work(job)
        await self._store.record_charges([charge], job.origin_key)
        self._remembered.add(job.key)
        await self._committed(job, charge, settle)

    # -- steps ------------------------------------------------------------------------------

    async def _request(self, job: Job) -> ClaimRequest:
        return ClaimRequest(tenant=TENANT, key=job.key, fingerprint=job.fingerprint,
                            now=await self._clock.now(), lease=self._lease,
                            retention=self._retention)

    async def _work(self, job: Job) -> Charge:
        """The job itself: the charge to record (the ledger write commits with the key)."""
        await self._pause(job, PausePoint.BEFORE_WORK)
        if self._settings.work_delay:
            await asyncio.sleep(self._settings.work_delay)
        if job.fail == "before-work":
            raise _WorkFailed("X-Test-Fault: the work failed before it began")
        return Charge(id=f"ch_{secrets.token_hex(12)}", tenant=TENANT,
                      amount=job.fields.amount, currency=job.fields.currency,
                      customer=job.fields.customer, created_at=await self._clock.now())

    async def _committed(self, job: Job, charge: Charge, settle: Settlement) -> None:
        self._events.record("commit", key=job.origin_key, charge=charge.id)
        if job.fail == "after-work":  # the charge is durable: the retry must find it done
            raise _WorkFailed("X-Test-Fault: the work failed after it committed")
        await self._pause(job, PausePoint.BEFORE_ACK)
        if self._behaviour.ack != "before-work":
            await self._ack(settle, job.origin_key, "done")

    async def _pause(self, job: Job, point: PausePoint) -> None:
        if job.pause is not None and job.pause.point is point:
            self._events.record("pause", key=job.origin_key, point=point.value,
                                seconds=job.pause.seconds)
            await asyncio.sleep(job.pause.seconds)

    async def _exhausted(self, job: Job, settle: Settlement, delivery: Delivery) -> bool:
        """Dead-letter a message with no outcome yet that was delivered ``max_attempts`` times
        already: each earlier delivery ended without an ack (a consumer that dies on it)."""
        if not (self._behaviour.bounded_attempts
                and delivery.delivery_count >= self._settings.max_attempts):
            return False
        await self._dead_letter(settle, job.origin_key, f"delivered {delivery.delivery_count} "
                                "times without an outcome")
        return True

    # -- settling ---------------------------------------------------------------------------

    async def _ack(self, settle: Settlement, key: str | None, outcome: str) -> bool:
        if await settle.ack():
            self._events.record(settle.ack_event, key=key, outcome=outcome)
            return True
        self._events.record("ack-lost", key=key, outcome=outcome,
                            reason="the channel closed before the ack")
        return False

    async def _requeue(self, settle: Settlement, key: str | None, reason: str) -> None:
        await asyncio.sleep(self._settings.requeue_delay)
        if await settle.requeue():
            self._events.record("nack", key=key, requeue=True, reason=reason)

    async def _dead_letter(self, settle: Settlement, key: str | None, reason: str) -> None:
        logger.warning("dead-lettering a message (key %s): %s", key, reason)
        if await settle.dead_letter(reason):
            self._events.record("dead-letter", key=key, queue=self._settings.dead_letters,
                                reason=reason)

    async def _poison(self, settle: Settlement, key: str | None, reason: str) -> None:
        """No retry makes a poison message valid: dead-letter it now (or, flawed, requeue)."""
        self._events.record("poison", key=key, reason=reason)
        if self._behaviour.ack == "before-work":
            return  # already acked: it is gone
        if self._behaviour.bounded_attempts:
            await self._dead_letter(settle, key, reason)
        else:
            await self._requeue(settle, key, reason)

    async def _failed(
        self, settle: Settlement, key: str, reason: str, delivery: Delivery,
    ) -> None:
        """The work failed: try again, unless this was the last attempt."""
        attempt = delivery.delivery_count + 1
        self._events.record("work-failed", key=key, reason=reason, attempt=attempt)
        if self._behaviour.ack == "before-work":
            return
        if self._behaviour.bounded_attempts and attempt >= self._settings.max_attempts:
            await self._dead_letter(settle, key, f"{reason} (attempt {attempt} of "
                                    f"{self._settings.max_attempts})")
        else:
            await self._requeue(settle, key, reason)


def _response(charge: Charge) -> StoredResponse:
    """What the key row keeps as the job's outcome: the charge, as the HTTP server stores it."""
    body = json.dumps(charge.to_json(), separators=(",", ":")).encode()
    return StoredResponse(201, (("location", f"/charges/{charge.id}"),), body)
