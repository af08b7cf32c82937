"""The consumers restart at an old offset: every record since is read again."""

from __future__ import annotations

from harness.consumer import SETTLE, ConsumerContext, consumer_scenario

JOBS = 2


def drive(ctx: ConsumerContext) -> None:
    keys = [ctx.new_key() for _ in range(JOBS)]
    for key in keys:
        ctx.publish(key)
    for key in keys:
        ctx.wait_for_effect(key)
    offsets: dict[int, int] = {}
    for key in keys:
        place = ctx.place_of(key)
        if place is not None:
            offsets[place[0]] = min(offsets.get(place[0], place[1]), place[1])
        ctx.intend("read-again", key, ("P1",))
    running = [i.number for i in ctx.deployment.instances if i.process.running()]
    for number in running:  # a group's offsets are set while it has no members
        ctx.deployment.stop(number)
    ctx.nemesis.rewind(offsets or None)
    for number in running:
        ctx.start_member(number)
    for key in keys:
        ctx.wait_for_delivery(key, times=2, timeout=SETTLE)
    ctx.drain()


SCENARIO = consumer_scenario(
    name="offset-reset",
    summary="the consumers restart at an old offset and read every record since again; no "
            "second charge",
    story=(
        "Offsets go back: an operator resets a consumer group to replay a day after a bug "
        "fix, a deploy starts a new group reading from the earliest offset, a restored "
        "cluster's committed offsets are older than its logs. Every record since is read "
        "again, each one a job already done. A consumer that trusts its offsets to keep it "
        "from a second run charges every one of them again; one that remembers its keys in "
        "the store, for as long as it promises, acks them all without work."
    ),
    properties=("P1", "P2"),
    plan=(
        f"publish {JOBS} charges and wait until each is charged",
        "stop every consumer, set the group's committed offsets back to the first of those "
        "records (on each partition they went to), and start the consumers again",
        "wait until each record has been read again, drain",
        "check: still exactly one charge per key; unknown unless each record was seen read "
        "again after the reset",
    ),
    drive=drive,
    needs=frozenset({"offsets", "restart"}),
)
