"""The load plan: everything a Locust process needs, handed over as one JSON file.

The load command and its Locust processes share no memory (Locust must be imported before
``ssl``, so it runs in processes of its own: see ``harness.http.load``).  The plan is their whole
contract.  The Locust side rebuilds the target from it the way ``idem-harness check`` rebuilds
one from results.json, so both sides judge and send by the same definition.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from harness._target import Target
from harness.http._client import RetryPolicy

__all__ = [
    "CONNECT_TIMEOUT",
    "EXIT_INCOMPLETE",
    "EXIT_NO_MASTER",
    "EXIT_NO_WORKERS",
    "NODES_FILE",
    "LoadPlan",
    "events_file",
    "target_definition",
]

NODES_FILE = "nodes.json"
#: Exit codes of the statistics process, here because both sides read them: the master's workers
#: did not connect; not every node sent its history.
EXIT_NO_WORKERS = 3
EXIT_INCOMPLETE = 4
#: A worker (``load --worker``) whose master never answered exits as a usage error does, after
#: this many seconds by default.
EXIT_NO_MASTER = 2
CONNECT_TIMEOUT = 60.0

#: Seconds a Locust process waits, beyond the retry policy's own bound, for the last charges.
DRAIN_SLACK = 5.0


def events_file(work_dir: Path, node: str) -> Path:
    """Where the history of Locust node ``node`` (``local``, ``w1``, ...) is written."""
    return work_dir / f"events-{node}.jsonl"


def target_definition(target: Target) -> dict[str, Any]:
    """The target as JSON data that ``Target.model_validate`` turns back into the same target."""
    return {**target.model_dump(mode="json", exclude={"source"}), "source": target.source}


@dataclass(frozen=True)
class LoadPlan:
    """What every Locust process of one run is told.

    ``urls`` are the Toxiproxy proxies in front of the target's instances, in instance order;
    ``master_port`` is set when the run is distributed (``workers`` > 0), and the master listens
    on ``master_host``.  With ``remote_workers`` the workers are started on other machines
    (``idem-harness load --worker``), none here, and the master waits ``worker_wait`` seconds for
    them.  The master sends this plan to each worker as it connects: workers read no file.
    """

    run_id: str
    seed: int
    users: int
    spawn_rate: float
    duration: float
    workers: int
    urls: tuple[str, ...]
    target: dict[str, Any]
    request_timeout: float
    policy: RetryPolicy
    report_dir: str
    work_dir: str
    master_port: int | None = None
    #: The shares of charges that are double-submitted, and that reuse their key afterwards.
    double_submit: float = 0.0
    reuse: float = 0.0
    master_host: str = "127.0.0.1"
    remote_workers: bool = False
    worker_wait: float = 60.0

    @property
    def drain_timeout(self) -> float:
        """The longest a charge can still be retrying once the load stops: the retry budget."""
        policy = self.policy
        return policy.deadline + self.request_timeout + policy.max_delay + DRAIN_SLACK

    def load_target(self) -> Target:
        """The target, with the load's per-attempt timeout as its client timeout."""
        target = Target.model_validate(self.target)
        client = target.client.model_copy(update={"timeout": self.request_timeout})
        return target.model_copy(update={"client": client})

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2) + "\n"

    @classmethod
    def from_json(cls, text: str) -> LoadPlan:
        data = json.loads(text)
        return cls(**{**data, "policy": RetryPolicy(**data["policy"]),
                      "urls": tuple(data["urls"])})

    def write(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(self.to_json(), encoding="utf-8")

    @classmethod
    def read(cls, path: Path) -> LoadPlan:
        return cls.from_json(path.read_text(encoding="utf-8"))
