"""The explorer's opening tells the catalog's late burst (issue 37: explore catches every flaw
`run` catches): copies of an expired key released together, of which at most one may run.
wsgi_latin1's expired-burst checks the expiry outside its claim, so each copy runs; `run`'s
late-retry caught it, and explore at seed 1 missed it within 60 examples before the opening
told this story, since an old key, a jump past its retention and its copies rarely meet by
chance."""

from __future__ import annotations

from pathlib import Path

from harness.explore import ExploreConfig, explore, render_story
from harness.services._toxiproxy import ToxiproxyServer
from tests.corpus.conftest import corpus_target


def test_copies_of_an_expired_key_are_a_story_of_the_opening(
        toxiproxy_server: ToxiproxyServer, report_dir: Path) -> None:
    done = explore(ExploreConfig(target=corpus_target("wsgi_latin1", "expired-burst"),
                                 max_examples=1, seed=1, report_dir=report_dir,
                                 toxiproxy=toxiproxy_server, shrink_seconds=5, first_only=True))
    assert done.result.exit_code == 1
    (story,) = done.stories
    told = render_story(story)
    assert "P1" in story.properties, (story.kinds, told)
    assert "burst_again" in told and "copies=4" in told, told
