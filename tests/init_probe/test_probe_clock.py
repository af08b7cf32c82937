"""``probe`` learns what a restart does to a test clock the file leaves undescribed
(``[hooks.clock] restart_resets``), where the service can show it (issue 38, item 2): a key made
before a clock jump past the retention is still replayed after a restart when the restart set
the clock back, and executed anew when the clock kept its offset.  Each on a corpus service
with its file's ``restart_resets`` taken out."""

from __future__ import annotations

from pathlib import Path

import pytest
import tomlkit

from harness.targets._loader import load_target
from tests.corpus.conftest import corpus_target
from tests.init_probe.conftest import ROOT, cli


@pytest.mark.parametrize(("service", "resets"), [
    ("memory_clock_unsaid", True),   # the offset lives in the process
    ("sweeping_cleanup", False),     # the offset lives in the SQLite file
])
def test_probe_learns_what_a_restart_does_to_the_clock(
        env: dict[str, str], tmp_path: Path, service: str, resets: bool) -> None:
    document = tomlkit.parse(Path(corpus_target(service).source).read_text())
    document["start"]["cwd"] = str(ROOT)  # type: ignore[index]
    clock = document["hooks"]["clock"]  # type: ignore[index]
    clock.pop("restart_resets", None)  # type: ignore[union-attr]
    target = tmp_path / f"{service}.toml"
    target.write_text(tomlkit.dumps(document))
    assert load_target(target).hooks.clock.restart_resets is None  # type: ignore[union-attr]
    done = cli(env, "probe", "--target", str(target), "--seed", "11", "--write")
    assert done.exit_code == 0, done.output
    learned = load_target(target)
    assert learned.hooks.clock is not None
    assert learned.hooks.clock.restart_resets is resets, target.read_text()
    assert "bug" not in done.output.lower(), done.output  # a key executed anew was expected


@pytest.mark.parametrize("clock", [
    '[hooks]\nclock = { path = "/clock" }\n',
    '[hooks.clock]\npath = "/clock"\n',
])
def test_restart_resets_is_written_into_the_clock_hook_however_it_is_written(clock: str) -> None:
    """``[hooks.clock]`` is often an inline table (``clock = { ... }``), which takes the value
    but not a comment: the probe's note then goes beside it, in [hooks]."""
    from harness.http.drafting._probe_edit import apply_observations
    from harness.http.drafting._probe_types import Observation

    text = ('name = "x"\nurl = "http://127.0.0.1:9000"\n[effects]\nkind = "http"\nurl = "/e"\n'
            'query = { key = "{key}" }\n' + clock)
    written = apply_observations(
        text, [Observation("hooks.clock", "restart_resets", "learned", "it was replayed", True)],
        source="x.toml")
    assert "restart_resets = true" in written and "probe: " in written, written
    assert "it was replayed" in written
