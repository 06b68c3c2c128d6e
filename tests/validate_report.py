#!/usr/bin/env python3
"""Validates a `flashmsa run --json` report against docs/run-report.schema.json.

Usage:
  validate_report.py REPORT.json                      validate an existing report
  validate_report.py REPORT.json -- CMD ARGS...       run CMD first (must exit 0), then validate
  validate_report.py --expect-exit N --expect-stderr TEXT -- CMD ARGS...
                                                      run CMD, require exit code N and TEXT in
                                                      its stderr (bad-option tests; no report)
Options:
  --schema FILE       schema (default: ../docs/run-report.schema.json next to this script)
  --require-pass      also require summary.passed == summary.total and every case passing

Besides the schema it checks the cross-field invariants: summary.line == "P/T cases
passed", P == number of passing cases, T == number of cases, and times_ms.total ==
insert + indexer + attention. Exit status: 0 valid, 1 invalid, 77 when the python
'jsonschema' package is missing (CTest reports the test as skipped).
"""

import argparse
import json
import os
import subprocess
import sys


def run_command(cmd, expect_exit, expect_stderr):
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    sys.stdout.write(proc.stdout[-4000:])
    sys.stderr.write(proc.stderr[-4000:])
    if proc.returncode != expect_exit:
        print(f"validate_report: command exited with {proc.returncode}, expected {expect_exit}: {' '.join(cmd)}")
        return False
    if expect_stderr is not None and expect_stderr not in proc.stderr:
        print(f"validate_report: expected {expect_stderr!r} in the command's stderr")
        return False
    if expect_exit == 0:
        lines = [l for l in proc.stdout.splitlines() if l.strip()]
        if not lines or not lines[-1].endswith("cases passed"):
            print("validate_report: the last stdout line is not 'N/M cases passed'")
            return False
    return True


def check_invariants(report, require_pass):
    errors = []
    cases = report["cases"]
    passed = sum(1 for c in cases if c["pass"])
    s = report["summary"]
    if s["total"] != len(cases):
        errors.append(f"summary.total {s['total']} != {len(cases)} cases")
    if s["passed"] != passed:
        errors.append(f"summary.passed {s['passed']} != {passed} passing cases")
    if s["line"] != f"{s['passed']}/{s['total']} cases passed":
        errors.append(f"summary.line {s['line']!r} does not match passed/total")
    for c in cases:
        t = c["times_ms"]
        if abs(t["total"] - (t["insert"] + t["indexer"] + t["attention"])) > 1e-6 * max(1.0, t["total"]):
            errors.append(f"case {c['id']}: times_ms.total != insert + indexer + attention")
        if len(c["query_lens"]) != c["batch_size"] or len(c["seq_lens"]) != c["batch_size"]:
            errors.append(f"case {c['id']}: length lists do not match batch_size")
        if c["pass"] and c["status"] != "ok":
            errors.append(f"case {c['id']}: pass with status {c['status']!r}")
        if c["check"]["enabled"] and c["status"] in ("ok", "failed") and c["check"]["elements"] <= 0:
            errors.append(f"case {c['id']}: check enabled but no elements compared")
        if require_pass and not c["pass"]:
            errors.append(f"case {c['id']}: did not pass ({c['error']})")
    return errors


def main():
    argv = sys.argv[1:]
    cmd = []
    if "--" in argv:
        i = argv.index("--")
        argv, cmd = argv[:i], argv[i + 1:]
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("report", nargs="?")
    ap.add_argument("--schema", default=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                     "..", "docs", "run-report.schema.json"))
    ap.add_argument("--require-pass", action="store_true")
    ap.add_argument("--expect-exit", type=int, default=0)
    ap.add_argument("--expect-stderr", default=None)
    args = ap.parse_args(argv)

    if cmd:
        if args.expect_exit == 0 and args.report and os.path.exists(args.report):
            os.remove(args.report)  # never validate a stale report
        if not run_command(cmd, args.expect_exit, args.expect_stderr):
            return 1
    if args.report is None:
        if not cmd:
            ap.error("give a report file and/or a command after --")
        return 0

    try:
        import jsonschema
    except ImportError:
        print("validate_report: python package 'jsonschema' not installed; skipping")
        return 77

    with open(args.schema) as f:
        schema = json.load(f)
    try:
        with open(args.report) as f:
            report = json.load(f)
    except (OSError, ValueError) as e:
        print(f"validate_report: cannot read {args.report}: {e}")
        return 1
    validator_cls = jsonschema.validators.validator_for(schema)
    validator_cls.check_schema(schema)
    validator = validator_cls(schema)
    errors = [f"{'/'.join(str(p) for p in e.absolute_path) or '<root>'}: {e.message}"
              for e in validator.iter_errors(report)]
    if not errors:
        errors = check_invariants(report, args.require_pass)
    if errors:
        for e in errors[:50]:
            print("validate_report: " + e)
        print(f"validate_report: {args.report}: INVALID ({len(errors)} problems)")
        return 1
    print(f"validate_report: {args.report}: valid ({len(report['cases'])} cases, {report['summary']['line']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
