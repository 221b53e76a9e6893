"""python -m ravel_ray load|compact|maintain --store S --table T [--input GLOB...] [--steps N]
[--address ADDR [--connect-timeout S]]: a ravel-load job on Ray (a local Ray on loopback without
--address)."""

import argparse
import json
import sys

from .driver import CONNECT_TIMEOUT_S, JobFailed, run_job


def at_least(least, kind=int):
    """An argparse type: a number no smaller than `least`."""

    def parse(text):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if value < least:
            raise argparse.ArgumentTypeError(f"must be at least {least}, not {text}")
        return value

    return parse


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m ravel_ray", description=__doc__)
    p.add_argument("operation", choices=["load", "compact", "maintain"])
    p.add_argument("--store", required=True, help="a local directory or s3://bucket/prefix")
    p.add_argument("--table", required=True)
    p.add_argument("--input", nargs="+", default=[], help="Parquet files or globs (load)")
    p.add_argument("--steps", type=at_least(1), default=4,
                   help="merge steps; a load also splits into as many shares (the plan may cut fewer)")
    p.add_argument("--address", help="a running Ray cluster (default: start a local one on 127.0.0.1)")
    p.add_argument("--connect-timeout", type=at_least(0.1, float), default=CONNECT_TIMEOUT_S,
                   help=f"seconds to wait for --address to answer before giving up (default: {CONNECT_TIMEOUT_S:g})")
    p.add_argument("--load-budget", type=at_least(1), help="bytes one step may hold (default: the tier's budget)")
    p.add_argument("--object-bytes", type=at_least(1),
                   help="target bytes of each object (default: the tier's); the input fills at most bytes / this merge steps")
    p.add_argument("--max-retries", type=at_least(0), default=3, help="retries of a step whose worker died")
    p.add_argument("--json", action="store_true", help="print the commit's report as JSON")
    a = p.parse_args(argv)
    if a.operation == "load" and not a.input:
        p.error("load needs --input")
    if a.operation != "load" and a.input:
        p.error(f"{a.operation} takes no --input")
    try:
        report = run_job(
            a.operation, a.store, a.table, a.input, a.steps, a.address, a.max_retries, a.load_budget,
            a.connect_timeout, a.object_bytes,
        )
    except JobFailed as e:
        print(e.message if e.message.startswith("error:") else f"error: {e.message}", file=sys.stderr)
        return e.code
    if a.json:
        print(json.dumps(report, indent=2))
    else:
        v = report.get("version")
        if report.get("already_published"):
            print(f"job {report['job']}: already published in version {v}")
        else:
            print(
                f"job {report['job']} ({report['operation']}): version {v}, {report['objects']} objects, "
                f"{report['rows']} rows, {report['stored_bytes']} bytes stored, {report['wall_s']:.2f} s commit"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
