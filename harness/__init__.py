"""idem-harness: prove an HTTP idempotency-key implementation never duplicates a side effect.

The public surface is re-exported here; the modules behind it are private.  The re-exports are
resolved on first use (PEP 562), because the pytest plugin makes every pytest run import this
package, and the engine behind it (pydantic, httpx, psycopg) takes most of a second to load.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from harness._errors import (
        HarnessError,
        RemoteTargetRefused,
        ServiceError,
        ServiceUnavailable,
        TargetFileError,
        ToxiproxyError,
        UsageError,
    )
    from harness._history import Event, History
    from harness._nemesis import Fault
    from harness._outcomes import RunResult, ScenarioOutcome
    from harness._profiles import Profile, get_profile, in_ci
    from harness._runner import RunConfig, judge, run_scenarios
    from harness._scenario import NotApplicable, Scenario
    from harness._target import KeySpec, Promises, Target
    from harness.http._client import RecordingClient, Request, RetryPolicy, fingerprint
    from harness.http._context import ScenarioContext
    from harness.http._deployment import Deployment, Instance
    from harness.http._nemesis import FAULTS, Nemesis, fault_named
    from harness.judging._analysis import COPIES_MET, Attempt, View, is_final
    from harness.judging._checker import (
        PROPERTIES,
        CheckOptions,
        CheckResult,
        Inconclusive,
        PropertyResult,
        check_history,
        prop,
    )
    from harness.judging._findings import SAFETY_PROPERTIES, Finding, Note, Verdict
    from harness.services._commit_proxy import AfterWrite, CommitProxy
    from harness.targets._loader import load_target

_EXPORTS: dict[str, str] = {
    "Attempt": "harness.judging._analysis",
    "View": "harness.judging._analysis",
    "PROPERTIES": "harness.judging._checker",
    "CheckOptions": "harness.judging._checker",
    "CheckResult": "harness.judging._checker",
    "Inconclusive": "harness.judging._checker",
    "PropertyResult": "harness.judging._checker",
    "check_history": "harness.judging._checker",
    "prop": "harness.judging._checker",
    "RecordingClient": "harness.http._client",
    "Request": "harness.http._client",
    "RetryPolicy": "harness.http._client",
    "fingerprint": "harness.http._client",
    "is_final": "harness.judging._analysis",
    "COPIES_MET": "harness.judging._analysis",
    "AfterWrite": "harness.services._commit_proxy",
    "CommitProxy": "harness.services._commit_proxy",
    "Deployment": "harness.http._deployment",
    "Instance": "harness.http._deployment",
    "HarnessError": "harness._errors",
    "RemoteTargetRefused": "harness._errors",
    "ServiceError": "harness._errors",
    "ServiceUnavailable": "harness._errors",
    "TargetFileError": "harness._errors",
    "ToxiproxyError": "harness._errors",
    "UsageError": "harness._errors",
    "SAFETY_PROPERTIES": "harness.judging._findings",
    "Finding": "harness.judging._findings",
    "Note": "harness.judging._findings",
    "Verdict": "harness.judging._findings",
    "Event": "harness._history",
    "History": "harness._history",
    "FAULTS": "harness.http._nemesis",
    "Fault": "harness._nemesis",
    "Nemesis": "harness.http._nemesis",
    "fault_named": "harness.http._nemesis",
    "RunResult": "harness._outcomes",
    "ScenarioOutcome": "harness._outcomes",
    "Profile": "harness._profiles",
    "get_profile": "harness._profiles",
    "in_ci": "harness._profiles",
    "RunConfig": "harness._runner",
    "judge": "harness._runner",
    "run_scenarios": "harness._runner",
    "NotApplicable": "harness._scenario",
    "Scenario": "harness._scenario",
    "ScenarioContext": "harness.http._context",
    "KeySpec": "harness._target",
    "Promises": "harness._target",
    "Target": "harness._target",
    "load_target": "harness.targets._loader",
}

__all__ = [
    "COPIES_MET",
    "FAULTS",
    "PROPERTIES",
    "SAFETY_PROPERTIES",
    "AfterWrite",
    "Attempt",
    "CheckOptions",
    "CheckResult",
    "CommitProxy",
    "Deployment",
    "Event",
    "Fault",
    "Finding",
    "HarnessError",
    "History",
    "Inconclusive",
    "Instance",
    "KeySpec",
    "Nemesis",
    "NotApplicable",
    "Note",
    "Profile",
    "Promises",
    "PropertyResult",
    "RecordingClient",
    "RemoteTargetRefused",
    "Request",
    "RetryPolicy",
    "RunConfig",
    "RunResult",
    "Scenario",
    "ScenarioContext",
    "ScenarioOutcome",
    "ServiceError",
    "ServiceUnavailable",
    "Target",
    "TargetFileError",
    "ToxiproxyError",
    "UsageError",
    "Verdict",
    "View",
    "check_history",
    "fault_named",
    "fingerprint",
    "get_profile",
    "in_ci",
    "is_final",
    "judge",
    "load_target",
    "prop",
    "run_scenarios",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'harness' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
