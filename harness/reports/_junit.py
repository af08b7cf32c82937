"""JUnit XML for CI systems: one test case per scenario, its findings in the failure."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from harness._outcomes import RunResult

__all__ = ["render_junit"]


def render_junit(result: RunResult) -> str:
    outcomes = list(result.outcomes)
    unfinished = result.unfinished
    suite = ET.Element(
        "testsuite",
        name=f"idem-harness: {result.target.name}",
        tests=str(len(outcomes) + len(unfinished)),
        failures=str(sum(1 for o in outcomes if o.verdict == "fail")),
        errors=str(sum(1 for o in outcomes if o.verdict == "unknown") + len(unfinished)),
        skipped=str(sum(1 for o in outcomes if o.verdict == "n/a")),
        time=f"{result.seconds:.3f}",
    )
    for outcome in outcomes:
        case = ET.SubElement(suite, "testcase", classname=f"idem-harness.{result.target.name}",
                             name=outcome.name, time=f"{outcome.seconds:.3f}")
        if outcome.verdict == "fail":
            findings = outcome.findings
            failure = ET.SubElement(
                case, "failure",
                message="; ".join(f"{f.property} {f.key or ''}".strip() for f in findings)
                or (outcome.reason or "failed"),
                type="safety" if any(f.klass == "safety" for f in findings) else "conformance",
            )
            failure.text = "\n\n".join(
                f"[{f.property} {f.klass}] {f.message}" + (f"\nreproduce: {f.reproduce}"
                                                           if f.reproduce else "")
                for f in findings
            )
        elif outcome.verdict == "unknown":
            ET.SubElement(case, "error", message=outcome.reason or "no verdict").text = "\n".join(
                f"{pid}: {r.reason}" for pid, r in (outcome.check.results.items()
                                                    if outcome.check else []) if r.reason
            )
        elif outcome.verdict == "n/a":
            ET.SubElement(case, "skipped", message=outcome.reason or "not applicable")
    for name in unfinished:  # an interrupted run: what it never played is not a pass
        case = ET.SubElement(suite, "testcase", classname=f"idem-harness.{result.target.name}",
                             name=name, time="0.000")
        ET.SubElement(case, "error", message="not run: the run stopped early"
                      + (f" ({result.stopped_by})" if result.stopped_by else ""))
    suites = ET.Element("testsuites")
    suites.append(suite)
    ET.indent(suites)
    body = ET.tostring(suites, encoding="unicode")
    return f'<?xml version="1.0" encoding="utf-8"?>\n{body}\n'
