"""idem-harness: prove an HTTP idempotency-key implementation never duplicates a side effect.

The public surface is re-exported here; the modules behind it are private.
"""

from harness import _properties  # registers P1-P11
from harness._analysis import Attempt, View
from harness._checker import (
    PROPERTIES,
    CheckOptions,
    CheckResult,
    Inconclusive,
    PropertyResult,
    check_history,
    prop,
)
from harness._client import RecordingClient, Request, RetryPolicy, fingerprint, is_final
from harness._deployment import Deployment, Instance
from harness._errors import (
    HarnessError,
    RemoteTargetRefused,
    ServiceError,
    ServiceUnavailable,
    TargetFileError,
    ToxiproxyError,
    UsageError,
)
from harness._findings import SAFETY_PROPERTIES, Finding, Note, Verdict
from harness._history import Event, History
from harness._nemesis import FAULTS, Fault, Nemesis, fault_named
from harness._outcomes import RunResult, ScenarioOutcome
from harness._profiles import Profile, get_profile, in_ci
from harness._runner import RunConfig, judge, run_scenarios
from harness._scenario import Scenario, ScenarioContext
from harness._target import KeySpec, Promises, Target, load_target

del _properties

__all__ = [
    "FAULTS",
    "PROPERTIES",
    "SAFETY_PROPERTIES",
    "Attempt",
    "CheckOptions",
    "CheckResult",
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
