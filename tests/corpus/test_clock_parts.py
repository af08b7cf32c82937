"""A target whose clock nobody can tell after a restart, and which the explorer restarts, is
explored in two parts (issue 37: explore catches every flaw `run` catches): clock jumps
without restarts on one deployment, restarts without jumps on another.  memory_clock_unsaid
declares neither `[hooks.clock] read` nor `restart_resets`; its `retention-1h` (keys forgotten
after an hour where the file promises a day) shows only when the clock moves, and explore drew
no jumps on it at all before the parts, where `run` (which moves the clock before any restart)
always caught it."""

from __future__ import annotations

from pathlib import Path

from harness.explore import ExploreConfig, explore, render_story
from harness.services._toxiproxy import ToxiproxyServer
from tests.corpus.conftest import corpus_target


def test_a_flaw_only_a_jump_shows_is_found_in_the_clock_part(
        toxiproxy_server: ToxiproxyServer, report_dir: Path) -> None:
    done = explore(ExploreConfig(target=corpus_target("memory_clock_unsaid", "retention-1h"),
                                 max_examples=2, seed=1, report_dir=report_dir,
                                 toxiproxy=toxiproxy_server, shrink_seconds=5, first_only=True))
    numbers = done.result.extra["explore"]
    assert numbers["parts"] == ["clock", "restarts"]
    assert done.result.exit_code == 1, numbers
    (story,) = done.stories
    told = render_story(story)
    assert "advance_clock" in told and "crash" not in told, told
    assert "P1" in story.properties, (story.kinds, told)


def test_each_part_draws_its_own_steps_on_a_fresh_deployment(
        toxiproxy_server: ToxiproxyServer, report_dir: Path) -> None:
    """The correct service, both parts: no finding, a jump drawn and a crash drawn (never in
    one example), the second part's files apart from the first's."""
    done = explore(ExploreConfig(target=corpus_target("memory_clock_unsaid"),
                                 max_examples=2, seed=1, report_dir=report_dir,
                                 toxiproxy=toxiproxy_server, shrink_seconds=5))
    numbers = done.result.extra["explore"]
    assert done.result.exit_code == 0, numbers
    assert numbers["parts"] == ["clock", "restarts"]
    assert "clock jumps and restarts are drawn in two parts" in numbers["not_drawn"]["clock"]
    assert (report_dir / "target").is_dir() and (report_dir / "part-2" / "target").is_dir()
