"""A member dies between its work and its offset commit, and the group hands its partition to
another member that never saw the record: a consumer with cold state."""

from __future__ import annotations

from harness.consumer import SETTLE, ConsumerContext, consumer_scenario

#: The job pauses this long after its work: the kill lands in the pause.
PAUSE_MS = 1_500


def drive(ctx: ConsumerContext) -> None:
    ctx.ensure_consumers(2)
    key = ctx.new_key()
    holder = ctx.held_after_work(key, PAUSE_MS, incident="kill", elsewhere=True)
    ctx.kill(holder)  # not started again yet: the partition must go to the other member
    session = 3 * ctx.target.broker.heartbeat
    ctx.wait_for_delivery(key, times=2, timeout=session + SETTLE)
    ctx.wait_for_effect(key)
    ctx.restart(holder)
    ctx.drain()


SCENARIO = consumer_scenario(
    name="cold-reassignment",
    summary="a member is killed after its work and before its offset commit; the group hands "
            "its partition to a member that never saw the record; one charge",
    story=(
        "Two members of a consumer group each read a partition. One charges a card and is "
        "killed before it commits the record's offset: a deploy, an out-of-memory kill. Its "
        "session runs out and the group hands its partition to the other member, which reads "
        "the record again from the last committed offset. That member is warm, but cold for "
        "this record: it never saw it. Only the dedup key in the shared store tells it the job "
        "is done; a dedup cache filled at start-up, or kept per process, charges again."
    ),
    properties=("P1", "P2", "P9"),
    plan=(
        "run two members, each holding a partition; publish a charge that makes the member "
        "that takes it pause after its work, before its offset commit; wait until it reports "
        "the pause",
        "kill that member and leave it down: once its session has run out the group hands "
        "its partition to the other member; wait until that one reports reading the record "
        "and the charge is seen",
        "start the killed member again, drain",
        "check: exactly one charge for the key; unknown unless the kill came after the work "
        "and before the offset commit, and another member read the record again",
    ),
    drive=drive,
    needs=frozenset({"instances", "restart", "pause-before-ack", "partitions"}),
)
