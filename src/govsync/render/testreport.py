"""``govsync test``'s results: as lines for a terminal, as one JSON document (contract
section 13), and as JUnit XML for a CI's test reports (one test suite per policy)."""

from __future__ import annotations

import json
import re
import socket
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from govsync.formats import FORMAT_VERSION
from govsync.plan import CaseStatus
from govsync.policytests import Outcome, Report

_WORD = {CaseStatus.PASSED: "ok", CaseStatus.FAILED: "FAIL", CaseStatus.ERROR: "ERROR"}


def report_lines(report: Report, *, verbose: bool = False) -> list[str]:
    """A line a case that did not pass (every case with ``verbose``), at its place, then
    the counts: ``N passed, N failed, N errors``."""
    lines = []
    for o in report.outcomes:
        if o.status == CaseStatus.PASSED and not verbose:
            continue
        where = f"(environment {o.environment}) " if o.environment else ""
        said = f": {o.message}" if o.message else ""
        lines.append(f"{o.file}:{o.line}:{o.col}: {_WORD[o.status]} {where}{o.test} "
                     f"{o.case!r} ({o.policy}, {o.stage}){said}")
    s = report.summary()
    lines.append(f"{s['passed']} passed, {s['failed']} failed, {s['errors']} errors")
    return lines


def report_public(report: Report) -> dict[str, Any]:
    return {"formatVersion": FORMAT_VERSION,
            "tests": [o.public() for o in report.outcomes],
            "summary": report.summary()}


def report_json(report: Report) -> str:
    return json.dumps(report_public(report), ensure_ascii=False, separators=(",", ":")) + "\n"


# What XML 1.0 cannot hold, even escaped: control characters (but tab and line ends),
# lone surrogates, U+FFFE and U+FFFF.
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def _xml(text: str) -> str:
    """``text`` as XML may hold it: a character it cannot written as its escape (\\x1b), as
    the text report writes it."""
    return _NOT_XML.sub(lambda m: ascii(m.group())[1:-1], text)


def junit_xml(report: Report, seconds: float = 0.0) -> bytes:
    """JUnit XML: ``<testsuites>`` of one ``<testsuite>`` per policy (per environment and
    policy where there are environments), a ``<testcase>`` per case (classname: its
    PolicyTest; name: the case and its stage), with ``<failure>`` or ``<error>``."""
    suites: dict[tuple[str | None, str], list[Outcome]] = {}
    for o in report.outcomes:
        suites.setdefault((o.environment, o.policy), []).append(o)
    s = report.summary()
    root = ET.Element("testsuites", name="govsync test", tests=str(len(report.outcomes)),
                      failures=str(s["failed"]), errors=str(s["errors"]), time=_t(seconds))
    stamp = datetime.now(UTC).replace(microsecond=0).isoformat().replace("+00:00", "")
    host = socket.gethostname()
    each = seconds / len(report.outcomes) if report.outcomes else 0.0
    for i, ((environment, policy), outcomes) in enumerate(suites.items()):
        suite = ET.SubElement(
            root, "testsuite", name=f"{environment}: {policy}" if environment else policy,
            id=str(i), package=environment or "govsync", tests=str(len(outcomes)),
            failures=str(_count(outcomes, CaseStatus.FAILED)),
            errors=str(_count(outcomes, CaseStatus.ERROR)), skipped="0",
            time=_t(each * len(outcomes)), timestamp=stamp, hostname=host)
        ET.SubElement(suite, "properties")
        for o in outcomes:
            case = ET.SubElement(suite, "testcase", name=_xml(f"{o.case} ({o.stage})"),
                                 classname=_xml(o.test), file=_xml(o.file), line=str(o.line),
                                 time=_t(each))
            if o.status == CaseStatus.FAILED:
                ET.SubElement(case, "failure", message=_xml(o.message), type="failed").text = (
                    _xml(_details(o)))
            elif o.status == CaseStatus.ERROR:
                ET.SubElement(case, "error", message=_xml(o.message), type="error").text = (
                    _xml(_details(o)))
        ET.SubElement(suite, "system-out")
        ET.SubElement(suite, "system-err")
    ET.indent(root)
    return bytes(ET.tostring(root, encoding="utf-8", xml_declaration=True)) + b"\n"


def _details(o: Outcome) -> str:
    return (f"{o.file}:{o.line}:{o.col}: {o.message}\n"
            f"expected: {json.dumps(o.expected, sort_keys=True)}\n"
            f"decision: {json.dumps(o.decision, sort_keys=True)}")


def _count(outcomes: Sequence[Outcome], status: CaseStatus) -> int:
    return sum(1 for o in outcomes if o.status == status)


def _t(seconds: float) -> str:
    return f"{seconds:.3f}"
