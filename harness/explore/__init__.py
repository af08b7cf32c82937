"""The explorer: Hypothesis draws stories against a target; each failing one is shrunk and kept.

Stories of requests, retries, reused keys, bursts, faults, clock jumps and crashes; the checker
judges each after every step, and a failing story is shrunk to its shortest form, printed, saved
and replayable.

It drives the target through the same context, recording client, nemesis and checker as the
scenarios; it never judges anything itself.  What differs between kinds of target (an HTTP
service's requests and faults, ``harness/http/explore/``; a queue consumer's publishes, kills
and stalls, ``harness/consumer/explore/``) is each front end's ``Explorer`` (``harness._front``),
which ``explore`` and ``replay`` find by the target's kind.  docs/explorer.md and
docs/consumers.md tell the whole story.
"""

from harness.explore._explorer import (
    DEFAULT_SHRINK_SECONDS,
    DEFAULT_STEPS,
    Exploration,
    ExploreConfig,
    explore,
    hypothesis_settings,
    searches_at_once,
)
from harness.explore._keys import KeyPlan
from harness.explore._replay import Replay, ReplayConfig, replay
from harness.explore._report import replay_line
from harness.explore._story import Story, StoryStep, load_story, render_story, story_heading

__all__ = [
    "DEFAULT_SHRINK_SECONDS",
    "DEFAULT_STEPS",
    "Exploration",
    "ExploreConfig",
    "KeyPlan",
    "Replay",
    "ReplayConfig",
    "Story",
    "StoryStep",
    "explore",
    "hypothesis_settings",
    "load_story",
    "render_story",
    "replay",
    "replay_line",
    "searches_at_once",
    "story_heading",
]
