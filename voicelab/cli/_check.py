"""`voice-evaluator check CONFIG`: one short call to a product's endpoint, reported point by
point (:func:`voicelab.check_endpoint`). Exit 0 when every point passed, 3 when one failed, 4
when the product could not be reached."""

from __future__ import annotations

import argparse
import dataclasses
import json

from ..execution import check_endpoint
from ._output import relative

_MARK = {"passed": "ok  ", "failed": "FAIL", "not_applicable": "n/a "}


def check_command(args: argparse.Namespace) -> int:
    found = check_endpoint(args.config, overrides=args.overrides,
                           artifacts_dir=args.artifacts_dir)
    if args.json:
        print(json.dumps({"adapter": found.adapter, "turn_taking": found.turn_taking,
                          "exit_code": found.exit_code,
                          "location": found.location if args.artifacts_dir else None,
                          "points": [dataclasses.asdict(p) for p in found.points]}, indent=2))
        return found.exit_code
    print(f"endpoint: {found.adapter} ({found.turn_taking} turn taking)")
    for point in found.points:
        print(f"{_MARK[point.status]} {point.name}: {point.found}")
        if point.fix:
            print(f"     fix: {point.fix}")
    failed = [p.name for p in found.points if p.status == "failed"]
    if not found.connected:
        print("could not connect: nothing else was checked")
    elif failed:
        print(f"{len(failed)} point(s) failed: {', '.join(failed)}")
    else:
        print("everything a suite needs works")
    if args.artifacts_dir is not None:
        print(f"bundle: {relative(found.location)}")
    return found.exit_code
