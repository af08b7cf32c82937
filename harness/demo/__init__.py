"""The training demo: every named flaw of the reference server, shown step by step and fixed.

``idem-harness demo FLAW`` is its front end; ``run_demo`` runs without the CLI.
"""

from harness.demo._lesson import DemoResult, run_demo
from harness.demo._modes import FailureMode, failure_mode, failure_modes, mode_lines
from harness.demo._narrator import Narrator

__all__ = [
    "DemoResult",
    "FailureMode",
    "Narrator",
    "failure_mode",
    "failure_modes",
    "mode_lines",
    "run_demo",
]
