"""The `ember-report` command (also `python -m ember.report`)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ember.report import write_report
from ember.report.load import trace_files


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="ember-report", description="Render an Ember compile trace as one HTML file."
    )
    parser.add_argument("trace", help="the EMBER_TRACE_DIR folder, or one trace .jsonl file")
    parser.add_argument("-o", "--output", default="ember_report.html", help="the HTML file")
    args = parser.parse_args(argv)
    if not Path(args.trace).exists():
        parser.error(f"{args.trace} does not exist")
    if not trace_files(args.trace):
        parser.error(f"no *.jsonl trace files in {args.trace} (was EMBER_TRACE_DIR set?)")
    path = write_report(args.trace, args.output)
    print(path.resolve())
    return 0


if __name__ == "__main__":
    sys.exit(main())
