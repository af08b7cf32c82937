"""A member's job outlives its poll interval while a second member joins: the group hands the
partition over, and the record is read again while the first still works on it (Kafka's
zombie)."""

from __future__ import annotations

from harness.consumer import SETTLE, ConsumerContext, consumer_scenario

#: How much longer than the poll interval the first member's job pauses: time for the group to
#: drop it, hand its partition to the second member, and for that one to read the record, all
#: while the first is still in the job.
OUTLIVE_BY = 3.0


def drive(ctx: ConsumerContext) -> None:
    poll = ctx.target.broker.max_poll_interval
    assert poll is not None  # guaranteed by needs
    pause = int((poll + OUTLIVE_BY) * 1000)
    ctx.ensure_consumers(1)
    for instance in ctx.deployment.instances[1:]:  # the first member alone, to begin with
        if instance.process.running():
            ctx.deployment.stop(instance.number)
    ctx.deployment.wait_for_consumers(1)
    key = ctx.new_key()
    ctx.publish(key, pause=("before-work", pause))
    ctx.wait_for_delivery(key, paused=True, timeout=SETTLE)
    first = ctx.holder(key) or 0
    second = next((i.number for i in ctx.deployment.instances if i.number != first), 1)
    ctx.intend("copy-while-working", key, ("P1", "P9"), instance=first,
               pause_seconds=pause / 1000)
    with ctx.nemesis.outliving("poll-interval-outlived", first):
        # it is ready once the group gives it partitions: once the first has been dropped
        ctx.start_member(second)
        ctx.wait_for_delivery(key, times=2, timeout=pause / 1000)
        ctx.observe(key)
        ctx.wait_for_effect(key, timeout=pause / 1000 + 10)
    ctx.ensure_consumers(2)  # the first polls again after its job, and rejoins
    ctx.drain()


SCENARIO = consumer_scenario(
    name="rebalance-while-working",
    summary="a member's job outlives max.poll.interval while a second member joins: the record "
            "is read again by the second while the first still works on it; one charge",
    story=(
        "A Kafka consumer polls, takes a record and starts a slow job: a payment provider that "
        "hangs, a lock it waits for. A second member joins the group (a deploy scales the "
        "workers up). The group cannot finish the rebalance while the first member does not "
        "poll; once the job has outlived max.poll.interval.ms the client leaves the group on "
        "the member's behalf, and the partition goes to the second member, which reads the "
        "record again from the last committed offset. The first member is a zombie: it "
        "finishes the job, and its offset commit is refused. Only a claim of the key in the "
        "shared store, made before the work, keeps the second member from charging again; a "
        "dedup kept in the process's memory, or a key written after the work, does not."
    ),
    properties=("P1", "P2", "P9"),
    plan=(
        "run one member (the others stopped), and publish a charge that makes it pause before "
        "its work for longer than its poll interval (max_poll_interval + 3 s); wait until it "
        "reports the pause",
        "start a second member: the group hands it the partition once the first has outlived "
        "its poll interval; wait until it reports reading the record",
        "wait until the charge is committed; the first member rejoins the group after its "
        "job; drain",
        "check: exactly one charge for the key; unknown unless the second member read the "
        "record while the first was still in the job",
    ),
    drive=drive,
    needs=frozenset({"instances", "pause-before-work", "poll-interval"}),
)
