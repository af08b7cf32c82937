"""Did a consumer scenario's fault meet the job as it meant to?  Read from the evidence alone.

A scenario records what it meant (an ``intent`` event: "kill while the key is claimed and not
done") and what it saw just before acting (``observe`` events: the key's effects, the messages
ready, the consumers counted); a consumer's events feed adds its deliveries, claims, pauses and
commits.  Here each intent is weighed against that evidence.  When the evidence does not show
the precondition (the kill landed after the commit, the stall after the pause, the copy after
the first job finished, or nothing could be seen), a property that found nothing wrong with
the key cannot pass on it: its verdict is unknown, with the reason.  A finding stands either
way: a duplicate is a duplicate however it came about.

The intents, by ``what``:

- ``work-done-ack-held``: the job committed while the consumer's acks were held, then its
  connection was cut or it was killed (``incident``): the message must come back.
- ``killed-mid-job``: the consumer was killed while it held the key's message, before the job
  committed.
- ``copy-while-working``: a second consumer got the message while the first was still in the
  job (paused before the work for ``pause_seconds``).
- ``copies-overlapped``: several copies of one job were in consumers' hands at once.
- ``first-publish-queued``: the publish whose confirm was lost reached the queue before the
  producer published again.
- ``work-done-commit-pending``: the job committed and the consumer had not settled its message
  with the broker (a Kafka record's offset not committed: the consumer paused after its work)
  when it was killed or its link cut (``incident``); with ``elsewhere``, another consumer read
  the message again afterwards (a partition reassigned to a member with cold state).
- ``read-again``: the consumers' place in the queue was set back past the key's message (a
  Kafka group's offsets), and a consumer read it again.
"""

from __future__ import annotations

from collections.abc import Callable

from harness._history import Event
from harness.judging._analysis import View

__all__ = ["INTENTS", "unexercised"]


def _after(events: list[Event], start: Event, *kinds: str, key: str | None = None,
           process: str | None = None) -> list[Event]:
    return [e for e in events if e.index > start.index and e.f in kinds
            and (key is None or e.key == key) and (process is None or e.process == process)]


def _first_publish(events: list[Event], key: str) -> Event | None:
    return next((e for e in events if e.f == "publish" and e.type == "invoke" and e.key == key),
                None)


def _at(event: Event) -> float:
    """When a consumer reported ``event`` happening (its own clock, the same for every consumer
    process of one run), else when the harness recorded it."""
    at = event.value.get("at")
    return float(at) if isinstance(at, int | float) else event.time


def _in_order(events: list[Event]) -> list[Event]:
    return sorted(events, key=lambda e: (_at(e), e.index))


def _reports(events: list[Event], key: str) -> bool:
    """Did an events feed report anything about ``key``?"""
    return any(e.f in ("deliver", "claim", "commit") and e.key == key for e in events)


def _incident(events: list[Event], intent: Event) -> Event | None:
    """The kill or cut the intent was recorded for: the first after it, on its instance."""
    instance = intent.value.get("instance", 0)
    for event in events:
        if event.index <= intent.index or event.value.get("instance", 0) != instance:
            continue
        if event.f == "crash" or (event.f == "fault"
                                  and event.value.get("fault") == "connection-cut"):
            return event
    return None


def _work_done_ack_held(events: list[Event], intent: Event, key: str) -> str | None:
    incident = _incident(events, intent)
    if incident is None:
        return "the kill or cut it was meant for never happened"
    published = _first_publish(events, key)
    instance = intent.value.get("instance", 0)
    # The hold the incident met: the last one on the instance before it (a story may hold
    # the acks and lift the hold several times), and when that hold was lifted.
    held_from = next((e for e in reversed(events) if e.f == "fault"
                      and e.value.get("fault") == "ack-held"
                      and e.value.get("instance", 0) == instance
                      and e.index < incident.index), None)
    healed = next((e for e in events if held_from is not None and e.f == "heal"
                   and e.value.get("fault") == "ack-held"
                   and e.value.get("instance", 0) == instance
                   and e.index > held_from.index), None)
    if held_from is None or (published is not None and held_from.index > published.index):
        return "the consumer's acks were not held from before the publish"
    if healed is not None and healed.index < incident.index:
        return "the hold on the consumer's acks was lifted before the kill or cut"
    done = [e for e in events if e.index < incident.index and e.key == key
            and ((e.f == "observe" and (e.value.get("effects") or 0) >= 1) or e.f == "commit")]
    if not done:
        return (f"no effect of key {key} was seen before "
                f"{'the kill' if incident.f == 'crash' else 'the cut'}: the job may not have "
                "committed while its ack was held")
    return None


def _killed_mid_job(events: list[Event], intent: Event, key: str) -> str | None:
    crash = next((e for e in _after(events, intent, "crash")
                  if e.value.get("instance", 0) == intent.value.get("instance", 0)), None)
    if crash is None:
        return "the kill it was meant for never happened"
    before = [e for e in events if e.index < crash.index and e.key == key]
    if any(e.f == "commit" for e in before) or any(
            e.f == "observe" and (e.value.get("effects") or 0) >= 1 for e in before):
        return f"key {key}'s job had already committed when the consumer was killed"
    if _reports(events, key):
        process = f"consumer-{intent.value.get('instance', 0)}"
        if not any(e.f in ("deliver", "claim", "pause") and e.process == process
                   for e in before):
            return f"the killed consumer had not reported taking key {key}'s message"
        return None
    seen = [e for e in before if e.f == "observe" and e.index > intent.index]
    if not seen:
        return "nothing was observed before the kill, and the consumer has no events feed"
    last = seen[-1]
    if last.value.get("effects") is None:
        return "the effects of the key could not be read before the kill"
    if last.value.get("ready"):
        return (f"key {key}'s message was still waiting in the queue when the consumer was "
                "killed: no consumer held it")
    return None


def _copy_while_working(events: list[Event], intent: Event, key: str) -> str | None:
    first = f"consumer-{intent.value.get('instance', 0)}"
    pause = float(intent.value.get("pause_seconds", 0))
    published = _first_publish(events, key)
    if _reports(events, key):
        commits = _in_order([e for e in events if e.f == "commit" and e.key == key])
        pauses = _in_order([e for e in events if e.f == "pause" and e.key == key
                            and e.process == first])
        copies = _in_order([e for e in events if e.f == "deliver" and e.key == key
                            and e.process != first])
        if not copies:
            return f"no other consumer reported a delivery of key {key}"
        copy = copies[0]
        if commits and _at(commits[0]) < _at(copy):
            return (f"the second consumer got key {key}'s message after the first job had "
                    "committed")
        if pauses and _at(pauses[0]) + pause < _at(copy):
            return ("the second consumer got the message after the first consumer's pause in "
                    "the job had ended")
        return None
    if published is None:
        return "the message was never published"
    seen = [e for e in _after(events, intent, "observe", key=key)]
    if not seen:
        return "nothing was observed after the second consumer started, and there is no feed"
    look = seen[0]
    if look.value.get("effects") is None or look.value.get("effects"):
        return (f"key {key}'s job had committed (or its effects could not be read) by the "
                "time the second consumer was up")
    if look.value.get("ready"):
        return f"key {key}'s message was still waiting in the queue: no consumer held it"
    if look.time >= published.time + pause:
        return ("the second consumer came up after the first consumer's pause in the job had "
                "ended")
    return None


def _copies_overlapped(events: list[Event], intent: Event, key: str) -> str | None:
    copies = int(intent.value.get("copies", 2))
    if _reports(events, key):
        delivered = _in_order([e for e in events if e.f == "deliver" and e.key == key])
        commits = _in_order([e for e in events if e.f == "commit" and e.key == key])
        if len(delivered) < 2:
            return f"fewer than two deliveries of key {key} were reported"
        if commits and _at(commits[0]) < _at(delivered[1]):
            return "the second copy was delivered after the first job had committed"
        return None
    for look in _after(events, intent, "observe", key=key):
        if look.value.get("effects") == 0 and int(look.value.get("ready") or 0) <= copies - 2:
            return None
    return (f"no observation showed two copies of key {key} taken while no job had committed, "
            "and the consumer has no events feed")


def _first_publish_queued(events: list[Event], intent: Event, key: str) -> str | None:
    invokes = [e for e in _after(events, intent, "publish", key=key) if e.type == "invoke"]
    limit = invokes[1].index if len(invokes) > 1 else len(events)
    if any(e.index < limit and e.key == key
           and ((e.f == "observe" and (e.value.get("effects") or 0) >= 1)
                or e.f in ("deliver", "commit")) for e in events):
        return None
    return ("the message whose confirm was lost was never seen to arrive before the producer "
            "published again: the republish may be the only message")


def _place(events: list[Event], key: str) -> tuple[int, int] | None:
    """Where the broker put ``key``'s first confirmed message (partition, offset), if it said."""
    for event in events:
        if (event.f == "publish" and event.type == "ok" and event.key == key
                and "offset" in event.value):
            return int(event.value.get("partition") or 0), int(event.value["offset"])
    return None


def _work_done_commit_pending(events: list[Event], intent: Event, key: str) -> str | None:
    incident = _incident(events, intent)
    if incident is None:
        return "the kill or cut it was meant for never happened"
    what = "the kill" if incident.f == "crash" else "the cut"
    process = f"consumer-{intent.value.get('instance', 0)}"
    before = [e for e in events if e.index < incident.index and e.key == key]
    if any(e.f in ("ack", "dead-letter") and e.process == process for e in before):
        return (f"the consumer had settled key {key}'s message with the broker before {what}: "
                "nothing was left to read again")
    if not any(e.f == "commit" or (e.f == "observe" and (e.value.get("effects") or 0) >= 1)
               for e in before):
        return (f"no effect of key {key} was seen before {what}: the job may not have "
                "committed")
    place = _place(events, key)
    look = next((e for e in reversed(before) if e.f == "observe"), None)
    if place is not None and look is not None and isinstance(look.value.get("committed"), dict):
        committed = look.value["committed"].get(str(place[0]))
        if committed is not None and committed > place[1]:
            return (f"the group had committed past key {key}'s record before {what}: it would "
                    "not be read again")
    if _reports(events, key):
        again = [e for e in events if e.index > incident.index and e.f == "deliver"
                 and e.key == key]
        if intent.value.get("elsewhere"):
            again = [e for e in again if e.process != process]
            if not again:
                return f"no other consumer reported reading key {key}'s message after {what}"
        elif not again:
            return f"no consumer reported reading key {key}'s message again after {what}"
    return None


def _read_again(events: list[Event], intent: Event, key: str) -> str | None:
    rewind = next((e for e in _after(events, intent, "rewind")), None)
    if rewind is None:
        return "the rewind it was meant for never happened"
    if not _reports(events, key):
        return "without an events feed, a message read again cannot be seen"
    if not any(e.index > rewind.index and e.f == "deliver" and e.key == key for e in events):
        return f"no consumer reported reading key {key}'s message again after the rewind"
    return None


INTENTS: dict[str, Callable[[list[Event], Event, str], str | None]] = {
    "work-done-ack-held": _work_done_ack_held,
    "killed-mid-job": _killed_mid_job,
    "copy-while-working": _copy_while_working,
    "copies-overlapped": _copies_overlapped,
    "first-publish-queued": _first_publish_queued,
    "work-done-commit-pending": _work_done_commit_pending,
    "read-again": _read_again,
}


def unexercised(view: View, property_id: str) -> dict[str, str]:
    """Keys whose scenario meant to exercise ``property_id`` on them and cannot show it did,
    each with what the evidence lacks."""
    events = list(view.events)
    missing: dict[str, str] = {}
    for intent in (e for e in events if e.f == "intent" and e.key is not None):
        if property_id not in intent.value.get("properties", ()):
            continue
        what = str(intent.value.get("what"))
        weigh = INTENTS.get(what)
        assert intent.key is not None
        reason = (f"the history names an unknown precondition {what!r}" if weigh is None
                  else weigh(events, intent, intent.key))
        if reason is not None:
            missing.setdefault(intent.key, f"{what.replace('-', ' ')} not shown: {reason}")
    return missing
