"""Issue 37, item 3: seeds that matter.  An exploration goes on after the opening found a flaw
(it used to end there, so every seed told the same stories and nothing else), and what it
draws then depends on the seed: two seeds explore differently, and one seed again explores
exactly as before."""

from __future__ import annotations

from pathlib import Path

from harness._outcomes import RunEvent, Step
from harness.explore import ExploreConfig, explore
from harness.services._toxiproxy import ToxiproxyServer
from harness.targets._reference import reference_target

#: A flaw the opening's second story shows (before issue 37 nothing was drawn after it), and
#: the same way at every telling: a seed draws the same stories again as long as the target
#: answers the same (a race that went the other way ends a search at another example).
FOUND_AT_ONCE = "no-body-hash"


Sent = set[tuple[str, str | None, str | None]]


class _Requests:
    """Every new request an exploration sent, as the drawn values name it (retries, whose
    number depends on timing, and the session's own measurements left out; each example's
    tenants and keys have a prefix of their own, so only the tenant's name is kept)."""

    def __init__(self) -> None:
        self.sent: Sent = set()

    def handle(self, event: RunEvent) -> None:
        if not isinstance(event, Step):
            return
        sent = event.event
        label = str(sent.label)
        if (sent.f == "request" and sent.type == "invoke" and label != "retry"
                and not label.endswith("-probe")):  # the session's measurements, not drawn
            tenant = (sent.tenant or "").split("-")[0]  # the example's prefix is its own
            self.sent.add((label, tenant, sent.body))


def _drawn(seed: int, report_dir: Path, toxiproxy: ToxiproxyServer) -> Sent:
    requests = _Requests()
    done = explore(ExploreConfig(target=reference_target(store=None, flaw=FOUND_AT_ONCE),
                                 max_examples=6, seed=seed, shrink_seconds=3,
                                 report_dir=report_dir, toxiproxy=toxiproxy), [requests])
    assert done.result.exit_code == 1  # the opening found the flaw, and the search went on
    return requests.sent


def test_after_the_opening_two_seeds_explore_differently_and_one_seed_the_same(
        toxiproxy_server: ToxiproxyServer, tmp_path: Path) -> None:
    first = _drawn(1, tmp_path / "first", toxiproxy_server)
    again = _drawn(1, tmp_path / "again", toxiproxy_server)
    other = _drawn(2, tmp_path / "other", toxiproxy_server)
    assert first == again
    assert first != other and first - other and other - first
