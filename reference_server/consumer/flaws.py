"""The consumer's named flaws: each one real mistake, selectable with ``consume --flaw NAME``.

A flaw is data, as for the HTTP server (``reference_server.flaws``): its name, the properties it
breaks (ids from DESIGN.md), the one switch of ``ConsumerBehaviour`` it flips, and a docstring
whose first line is the story a report tells.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeAlias

from reference_server.consumer._behaviour import ConsumerBehaviour
from reference_server.flaws import Flaw, UnknownFlaw, combine

__all__ = [
    "CONSUMER_CANNOT_COMBINE",
    "CONSUMER_FLAWS",
    "KAFKA_CONSUMER_FLAWS",
    "ConsumerFlaw",
    "UnknownConsumerFlaw",
    "consumer_flaws_named",
    "get_consumer_flaw",
    "get_kafka_consumer_flaw",
    "kafka_consumer_flaws_named",
]

#: A consumer flaw is the HTTP server's kind of flaw, flipping a switch of ``ConsumerBehaviour``
#: (a type only: a frozen, slotted generic dataclass cannot be called through its alias).
ConsumerFlaw: TypeAlias = Flaw[ConsumerBehaviour]


class UnknownConsumerFlaw(UnknownFlaw):
    """No consumer flaw has that name; the message lists the ones that exist."""

    def __init__(self, name: str) -> None:
        super().__init__(name, CONSUMER_FLAWS, "consumer flaw")


_ALL: tuple[ConsumerFlaw, ...] = (
    Flaw("ack-before-work", ("P2",), {"ack": "before-work"}, """
Acks each message as soon as it arrives, before doing the job: a crash loses the job.

Mistake: auto-ack, or an explicit ack at the top of the handler "so the broker does not
redeliver"; if the consumer dies (or its work fails) after the ack, the broker has forgotten
the message and nobody does the job.
Breaks: P2 (every confirmed message has exactly one effect once the queue drains).
See it: publish a message with X-Test-Pause: before-work:5000 (--test-faults), kill the
consumer while it waits, restart it: the queue is empty and there is no charge.
"""),
    Flaw("no-dedup", ("P1",), {"dedup": "none"}, """
Trusts the broker to deliver once: no dedup key is checked at all.

Mistake: the handler does the work for every delivery; but queues deliver at least once, and a
lost ack, a crash before the ack or a producer's republish all deliver the message again.
Breaks: P1 (at most one effect per dedup key).
See it: publish the same message twice (a republish after a lost confirm): two charges.
"""),
    Flaw("dedup-after-work", ("P1", "P9"), {"dedup": "after-work"}, """
Writes the dedup key after the work, in a transaction of its own.

Mistake: "check the key, do the job, then record the key": a copy delivered to another consumer
while the job runs finds no key and runs it too, and a crash between the job's commit and the
key's leaves a job whose redelivery runs again.
Breaks: P1 (two effects for one key) and P9 (a crash does not converge to one effect).
See it: publish two copies of one message to two consumers at once (or with --prefetch 2 and
a slow job): two charges.
"""),
    Flaw("message-id-only", ("P1",), {"key_from_header": False}, """
Deduplicates on the broker's message id, ignoring the client's dedup key.

Mistake: the message id looks unique per job, but a producer that republishes after a lost
publisher confirm builds a new message (a new id) for the same job, so the copy is not a
duplicate to this consumer.
Breaks: P1 (at most one effect per dedup key).
See it: publish a message with Idempotency-Key K, publish it again with the same K and a new
message id: two charges.
"""),
    Flaw("check-then-insert", ("P1",), {"dedup": "check-then-insert"}, """
Looks the key up, then inserts it: two consumers that look at once both see nothing.

Mistake: SELECT, then INSERT, with no atomic claim (no ON CONFLICT, no check that the insert
took); when two consumers get copies of one message at once, both believe they own the key.
Breaks: P1 (at most one effect per dedup key).
See it: two consumers on one store, two copies of one message published at once: two charges.
"""),
    Flaw("short-dedup-window", ("P6", "P1"), {"retention_cap": 300.0}, """
Forgets finished keys after 5 minutes, whatever --retention promises.

Mistake: a dedup table with a TTL shorter than the longest redelivery (a message parked in a
retry queue, a consumer that was down for an hour); a redelivery after the window runs the job
again.
Breaks: P6 (the dedup window is shorter than promised) and then P1 (a second effect).
See it: with --test-clock, process a message, advance the clock 301 s, deliver it again: a
second charge, although --retention says 24 h.
"""),
    Flaw("poison-requeue-forever", ("P10",), {"bounded_attempts": False}, """
Requeues a message it cannot process, for ever.

Mistake: nack with requeue=True on every failure and no attempt limit, so a message that can
never succeed (not a valid charge) comes back again and again, and never reaches the
dead-letter queue.
Breaks: P10 (a poison message causes no effect and does not loop).
See it: publish a message whose body is not a charge: it is delivered over and over, and the
dead-letter queue stays empty.
"""),
)

CONSUMER_FLAWS: dict[str, ConsumerFlaw] = {flaw.name: flaw for flaw in _ALL}


#: Consumer flaws that flip no common switch and still cannot be switched on together, because
#: one hides the other: without any dedup every copy runs, whatever key or window it uses.
CONSUMER_CANNOT_COMBINE: dict[frozenset[str], str] = {
    frozenset({"no-dedup", other}):
        f"no-dedup runs every copy, so {other}, a dedup that goes wrong, can never show"
    for other in ("message-id-only", "short-dedup-window")
}


def get_consumer_flaw(name: str) -> ConsumerFlaw:
    try:
        return CONSUMER_FLAWS[name]
    except KeyError:
        raise UnknownConsumerFlaw(name) from None


def consumer_flaws_named(names: Sequence[str]) -> list[ConsumerFlaw]:
    """The consumer's flaws by name, checked to combine (``UnknownFlaw``, ``FlawClash``)."""
    return combine([get_consumer_flaw(name) for name in names],
                   cannot=CONSUMER_CANNOT_COMBINE)


_KAFKA: tuple[ConsumerFlaw, ...] = (
    Flaw("auto-commit-before-work", ("P2",), {"auto_commit": True}, """
Lets the client commit offsets on a timer (enable.auto.commit), whatever the work did.

Mistake: Kafka's default: every auto.commit.interval.ms the client commits the position poll
has reached, so a record is committed while its job still runs (or before it starts); a
consumer that dies then restarts past it, and nobody does the job.
Breaks: P2 (every acknowledged message has exactly one effect once the topic drains).
See it: produce a record with X-Test-Pause: before-work:5000 (--test-faults), wait for its
offset-commit event (outcome auto), kill the consumer, restart it: no charge, nothing to read.
"""),
    Flaw("dedup-in-memory", ("P1",), {"dedup": "memory"}, """
Remembers finished keys in the process's memory only.

Mistake: a set of seen keys in the consumer; but a restart forgets it, and after a rebalance
another member of the group, with a memory of its own, reads the record again from the last
committed offset (a kill after the work and before the offset commit, a member kept past
max.poll.interval.ms).
Breaks: P1 (at most one effect per dedup key).
See it: produce a record with X-Test-Pause: before-ack:5000, kill the consumer during the pause
(after the charge, before the offset commit), restart it: a second charge.
"""),
    Flaw("dedup-separate-txn", ("P1", "P9"), {"dedup": "after-work"}, """
Writes the effect and the dedup row in two transactions: look, work and commit, then the key.

Mistake: the dedup table is written after the effect, in a transaction of its own, so a copy
read meanwhile by another member (a producer retry landing on another partition, a zombie's
partition handed over) finds no key and runs the job too, and a crash between the two writes
leaves an effect whose record is read again and runs again.
Breaks: P1 (two effects for one key) and P9 (a crash does not converge to one effect).
See it: two members, a copy of one record on each of two partitions, the job slowed by
X-Test-Pause: before-work:500: two charges.
"""),
    Flaw("commit-before-work", ("P2",), {"ack": "before-work"}, """
Commits each record's offset as soon as it is read, before the job.

Mistake: commitSync() at the top of the handler "so a slow job is not read twice"; if the
consumer dies (or its work fails) after the commit, the group has moved past the record and
nobody does the job.
Breaks: P2 (every acknowledged message has exactly one effect once the topic drains).
See it: produce a record with X-Test-Pause: before-work:5000, kill the consumer while it waits,
restart it: nothing is read again, and there is no charge.
"""),
    Flaw("dedup-on-offset", ("P1",), {"key_from_header": False}, """
Deduplicates on the record's place in the log (topic, partition, offset), not on its key.

Mistake: the offset looks like a unique message id, and it does stop a record read twice from
running twice; but a producer that retries a send (its acknowledgement was lost) writes the
same job again at a new offset, which this consumer takes for a new job.
Breaks: P1 (at most one effect per dedup key).
See it: produce the same record twice (a producer retry): two charges.
"""),
)

KAFKA_CONSUMER_FLAWS: dict[str, ConsumerFlaw] = {flaw.name: flaw for flaw in _KAFKA}


def get_kafka_consumer_flaw(name: str) -> ConsumerFlaw:
    try:
        return KAFKA_CONSUMER_FLAWS[name]
    except KeyError:
        raise UnknownFlaw(name, KAFKA_CONSUMER_FLAWS, "Kafka consumer flaw") from None


def kafka_consumer_flaws_named(names: Sequence[str]) -> list[ConsumerFlaw]:
    """The Kafka consumer's flaws by name, checked to combine (``UnknownFlaw``, ``FlawClash``):
    any two that flip one switch (``commit-before-work`` and ``auto-commit-before-work`` do
    not; ``dedup-in-memory`` and ``dedup-separate-txn`` do) are refused."""
    return combine([get_kafka_consumer_flaw(name) for name in names])
