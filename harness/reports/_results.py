"""``results.json`` and ``history.jsonl``: the machine-readable record of a run.

``history.jsonl`` holds every event with its scenario's name; with the target's promises kept in
``results.json``, ``idem-harness check RUN_DIR`` can judge a run again without re-running it.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Iterable
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from harness._errors import UsageError
from harness._front import front_for
from harness._history import Event, History, event_from_json
from harness._outcomes import RunResult, ScenarioOutcome
from harness._target import Target
from harness.judging._findings import Verdict
from harness.targets._loader import saved_target

__all__ = ["SCHEMA", "load_run", "render_history", "render_results", "requests_sent",
           "run_account", "tool_version", "verdict_counts"]

SCHEMA = 1
VERDICTS: tuple[Verdict, ...] = ("pass", "fail", "unknown", "n/a")


def tool_version() -> str:
    try:
        return version("idem-harness")
    except PackageNotFoundError:
        return "unknown"


def requests_sent(outcome: ScenarioOutcome) -> int:
    """HTTP attempts (or, for a queue consumer, publishes) the scenario made, as every report
    counts them: invocations, answered or not."""
    return sum(1 for e in outcome.events if e.f in ("request", "publish") and e.type == "invoke")


def verdict_counts(outcomes: Iterable[ScenarioOutcome]) -> dict[str, int]:
    """Scenarios per verdict, every verdict present (zero included), in a fixed order."""
    counts = Counter(o.verdict for o in outcomes)
    return {v: counts[v] for v in VERDICTS}


def _scenario_json(outcome: ScenarioOutcome) -> dict[str, Any]:
    check = outcome.check
    return {
        "name": outcome.name,
        "verdict": outcome.verdict,
        "properties": list(outcome.properties),
        "reason": outcome.reason,
        "seconds": round(outcome.seconds, 3),
        "requests": requests_sent(outcome),
        "events": len(outcome.events),
        "property_verdicts": (
            {pid: r.verdict for pid, r in check.results.items()} if check else {}
        ),
        "unknown_reasons": (
            {pid: r.reason for pid, r in check.results.items() if r.reason} if check else {}
        ),
        "findings": [f.to_json() for f in outcome.findings],
        "notes": [n.to_json() for n in outcome.notes],
        **({"queue_account": check.summary} if check and check.summary else {}),
    }


def run_account(result: RunResult) -> dict[str, Any] | None:
    """The run's account, its scenarios' added up by its front end (a queue consumer's queue
    account; None for a kind that keeps none, an HTTP service)."""
    return front_for(result.target).add_accounts(
        o.check.summary for o in result.outcomes if o.check is not None)


def render_results(result: RunResult) -> str:
    outcomes = list(result.outcomes)
    findings = result.findings
    data = {
        "schema": SCHEMA,
        "tool": f"idem-harness {tool_version()}",
        "target": {
            "name": result.target.name,
            "source": result.target.source,
            "description": result.target.description,
            "definition": result.target.model_dump(mode="json", exclude={"source"}),
        },
        "seed": result.seed,
        "started_at": result.started_at,
        "seconds": round(result.seconds, 3),
        "retry_horizon": result.retry_horizon,
        "complete": result.complete,
        "planned": list(result.planned),
        "unfinished": list(result.unfinished),
        "stopped_by": result.stopped_by,
        "verdict": result.verdict,
        "counts": {
            "scenarios": len(outcomes),
            **verdict_counts(outcomes),
            "findings": len(findings),
            "safety_findings": sum(1 for f in findings if f.klass == "safety"),
        },
        "scenarios": [_scenario_json(o) for o in outcomes],
        **({"queue_account": account} if (account := run_account(result)) else {}),
        **({"extra": result.extra} if result.extra else {}),
    }
    return json.dumps(data, indent=2, sort_keys=False) + "\n"


def render_history(result: RunResult) -> str:
    return "".join(History(o.events).to_jsonl(scenario=o.name) for o in result.outcomes)


def load_run(run_dir: Path) -> tuple[dict[str, Any], Target, dict[str, list[Event]]]:
    """The saved results, the target as it was judged, and each scenario's history."""
    results_path, history_path = run_dir / "results.json", run_dir / "history.jsonl"
    for needed in (results_path, history_path):
        if not needed.exists():
            raise UsageError(f"{needed} is missing: {run_dir} is not a report directory of "
                             "`idem-harness run` (give the directory the run wrote)")
    try:
        results = json.loads(results_path.read_text())
        target = saved_target(results["target"]["definition"],
                              source=results["target"]["source"] or "")
        histories: dict[str, list[Event]] = defaultdict(list)
        for line in history_path.read_text().splitlines():
            if line.strip():
                data = json.loads(line)
                scenario = data.pop("scenario")
                histories[scenario].append(event_from_json(data))
    except (ValueError, KeyError, TypeError) as exc:
        raise UsageError(f"{run_dir} holds a damaged report ({exc}); run the harness again "
                         "to produce a fresh one") from exc
    _check_complete(run_dir, results, histories)
    return results, target, dict(histories)


def _check_complete(run_dir: Path, results: dict[str, Any],
                    histories: dict[str, list[Event]]) -> None:
    """A history with fewer events than the run recorded was cut short: judging what is left
    would turn missing evidence into a pass."""
    for scenario in results.get("scenarios", []):
        recorded = scenario.get("events")
        if recorded is None and scenario.get("requests"):
            recorded = scenario["requests"]  # older reports: at least one event per request
        found = len(histories.get(scenario["name"], []))
        if recorded and found < recorded:
            raise UsageError(
                f"{run_dir / 'history.jsonl'} is truncated: scenario {scenario['name']} has "
                f"{found} of its {recorded} events; the run cannot be judged again from it "
                "(restore the file, or run the harness again)")
