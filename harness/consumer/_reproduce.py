"""Reproductions of a consumer finding that work after the run ends.

An HTTP finding is replayed with ``curl``: the server saw nothing but requests.  A consumer's
story also needs what only the harness can do: publish with confirms, copies at once, an ack
held in Toxiproxy, a connection cut, a consumer killed between its work and its ack, its clock
moved.  So the script plays the scenario again through the harness with the run's seed, against
fresh consumers started as the run started them, and says whether the same property broke
again.  The target is written into the script, so a later edit of the target file does not
change what is replayed.  A race the run lost may be won the next time; the script says so
rather than call the flaw gone.
"""

from __future__ import annotations

import shlex
import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import tomlkit

from harness._history import Event
from harness.consumer._analysis import QueueView
from harness.consumer._target import ConsumerTarget
from harness.judging._analysis import View
from harness.judging._findings import Finding
from harness.reproduction._scripts import comment_lines

__all__ = ["consumer_script"]

#: Exit codes of the script, as a test's: the finding is still there, it is not, no verdict.
REPRODUCED, NOT_REPRODUCED, NO_REPLAY = 1, 0, 2

#: Reads the replay's results.json: did the scenario break the property again?
_VERDICT = textwrap.dedent('''\
    import json, sys
    results, scenario, prop, status = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    try:
        with open(results, encoding="utf-8") as file:
            outcome = next(o for o in json.load(file)["scenarios"] if o["name"] == scenario)
    except (OSError, ValueError, KeyError, StopIteration):
        print(f"\\nno verdict: the replay did not finish {scenario} (exit {status}); "
              "its output is above", file=sys.stderr)
        sys.exit(%(no_replay)d)
    again = [f for f in outcome["findings"] if f["property"] == prop]
    if again:
        print(f"\\nreproduced: {prop} broke again in {scenario}:\\n  {again[0]['message']}")
        sys.exit(%(reproduced)d)
    print(f"\\nnot reproduced this time: {scenario} came out {outcome['verdict']} "
          f"({outcome.get('reason') or 'no finding of ' + prop}). A race the run lost can go "
          "the other way: run the script again before calling the flaw fixed.")
    sys.exit(%(not_reproduced)d)
''') % {"no_replay": NO_REPLAY, "reproduced": REPRODUCED, "not_reproduced": NOT_REPRODUCED}


def consumer_script(finding: Finding, events: Sequence[Event], target: ConsumerTarget, *,
                    scenario: str, seed: int) -> str:
    """A bash script that plays ``scenario`` again with ``seed`` and judges ``finding``'s
    property; its comments say what the run saw."""
    python = shlex.quote(sys.executable)
    lines = [
        "#!/usr/bin/env bash",
        f"# idem-harness: reproduce {finding.property} ({finding.klass}) of consumer scenario "
        f"{scenario}, seed {seed}, target {target.name}.",
        *comment_lines(finding.message),
        *_what_happened(finding, events),
        "#",
        "# Usage: bash THIS_SCRIPT [AMQP_URL]",
        f"#   Plays {scenario} again with seed {seed} through the harness (its publishes, faults,",
        "#   kills and clock moves), against fresh consumers started as the run started them,",
        f"#   and says whether {finding.property} broke again: exit {REPRODUCED} if it did, "
        f"{NOT_REPRODUCED} if not, {NO_REPLAY} if the",
        "#   replay could not run.  AMQP_URL: the RabbitMQ broker to use (default: IDEM_AMQP_URL,",
        "#   else a throwaway node the harness starts).  The replay's report is removed at the",
        "#   end unless IDEM_REPLAY_REPORT names a directory to keep it in.",
        *_store_caveat(target),
        "set -euo pipefail",
        "",
        'if [[ $# -ge 1 ]]; then export IDEM_AMQP_URL="$1"; fi',
        'WORKDIR=$(mktemp -d "${TMPDIR:-/tmp}/idem-reproduce-XXXXXX")',
        "trap 'rm -rf \"$WORKDIR\"' EXIT",
        "trap 'exit 130' INT TERM  # through the EXIT trap: nothing is left behind",
        'REPORT="${IDEM_REPLAY_REPORT:-$WORKDIR/report}"',
        "cat >\"$WORKDIR/target.toml\" <<'IDEM_TARGET'",
        _target_file(target).rstrip("\n"),
        "IDEM_TARGET",
        "",
        "status=0",
        f"{python} -m harness.cli run --target \"$WORKDIR/target.toml\" "
        f"--scenario {shlex.quote(scenario)} --seed {seed} --report-dir \"$REPORT\" "
        "--quiet || status=$?",
        'if [[ -n "${IDEM_REPLAY_REPORT:-}" ]]; then echo "the replay\'s report: '
        '$REPORT/index.html" >&2; fi',
        f"{python} - \"$REPORT/results.json\" {shlex.quote(scenario)} "
        f"{finding.property} \"$status\" <<'IDEM_VERDICT'",
        _VERDICT.rstrip("\n"),
        "IDEM_VERDICT",
    ]
    return "\n".join(lines) + "\n"


def _what_happened(finding: Finding, events: Sequence[Event]) -> list[str]:
    if finding.key is None:
        return []
    story = QueueView(View(events)).story(finding.key)
    if not story or story in finding.message:  # a duplicate's message tells it already
        return []
    return ["#", *comment_lines(f"In the run: {story}.")]


def _target_file(target: ConsumerTarget) -> str:
    """The target as the run used it, as a target file: only what differs from the defaults
    (a target read back from a saved run has every field set, the HTTP ones a consumer's file
    may not name among them; TOML has no null), the start directory made absolute (the
    script's file lives elsewhere)."""
    data: dict[str, Any] = {"kind": target.kind, **target.model_dump(
        mode="json", exclude={"source"}, exclude_defaults=True, exclude_none=True,
        by_alias=True)}  # the kind says which loader reads the file, default or not
    cwd = target.start.cwd
    if cwd is not None and not Path(cwd).is_absolute() and target.source:
        data["start"]["cwd"] = str(Path(target.source).absolute().parent / cwd)
    return tomlkit.dumps(data)


def _store_caveat(target: ConsumerTarget) -> list[str]:
    words = [*target.start.command, *target.start.env.values()]
    if not any(str(word).startswith(("postgres://", "postgresql://")) for word in words):
        return []
    return ["#   The consumer's PostgreSQL database, named in its start command, must still",
            "#   exist; one that --postgres made was dropped with its run: run the harness",
            "#   with --postgres again instead."]

