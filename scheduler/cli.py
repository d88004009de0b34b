"""`python -m scheduler` / `tas`: the engine's command line (see docs/CLI.md)."""

from __future__ import annotations

import argparse
import gc
import json
import sys
from collections.abc import Sequence
from datetime import UTC, datetime

from scheduler.errors import FlagError, InputError, one_line
from scheduler.features import FeatureGates


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # exit 2 with one line, as for any bad flag
        raise FlagError(f"{self.prog}: {message}")


def _parse_now(text: str | None) -> datetime:
    if text is None:
        return datetime.now(UTC)
    try:
        value = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise FlagError(f"--now: {text!r} is not an RFC 3339 time (e.g. 2025-01-01T00:00:00Z)") from None
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def _parse_cycles(text: str) -> int | None:
    if text == "all":
        return None
    # ASCII digits only: str.isdigit() also takes superscripts (which int() refuses) and
    # the digits of other scripts
    if not (text.isascii() and text.isdigit()) or int(text) < 1:
        raise FlagError(f"--cycles: {text!r} is not a positive number or 'all'")
    return int(text)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="tas", description="Kueue Topology Aware Scheduling engine")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    sim = sub.add_parser("simulate", help="one scheduling pass over a cluster snapshot")
    sim.add_argument("files", nargs="+", metavar="FILE", help="YAML or JSON files of Kubernetes objects; - reads "
                                                                "standard input")
    sim.add_argument("--feature-gates", default="", metavar="K=V,...")
    sim.add_argument("--now", default=None, metavar="RFC3339")
    sim.add_argument("--config", default=None, metavar="FILE",
                     help="Kueue's manager Configuration (config.kueue.x-k8s.io): resource transformations, "
                          "excluded resource prefixes, quotaCheckStrategy, fair sharing, waitForPodsReady, "
                          "featureGates (not together with --feature-gates)")
    sim.add_argument("-o", "--output", choices=("json", "yaml", "table"), default="json")
    sim.add_argument("--cycles", default="1", metavar="N|all",
                     help="scheduling cycles to run (a cycle admits at most one workload per ClusterQueue, "
                          "as in Kueue); 'all' repeats them until nothing more is admitted")

    enc = sub.add_parser("encode", help="encode a decoded TopologyAssignment as Kueue v1beta2")
    enc.add_argument("file", metavar="FILE", help="a TopologyAssignment (YAML or JSON); - reads standard input")
    enc.add_argument("--feature-gates", default="", metavar="K=V,...")
    enc.add_argument("--compact", action="store_true",
                     help="search for the smallest valid v1beta2 encoding (beyond Kueue's encoders)")

    dec = sub.add_parser("decode", help="decode a v1beta2 / v1beta1 TopologyAssignment or a Workload")
    dec.add_argument("file", metavar="FILE", help="a TopologyAssignment or a Workload (YAML or JSON); - reads "
                                                  "standard input")
    return parser


def _cmd_simulate(args: argparse.Namespace) -> int:
    from scheduler.config import effective_gates, read_configuration
    from scheduler.loader import STDIN, read_objects, source_name
    from scheduler.output import render
    from scheduler.simulate import simulate

    FeatureGates.parse(args.feature_gates)  # a bad flag is reported before any file is read
    now = _parse_now(args.now)
    cycles = _parse_cycles(args.cycles)
    if args.files.count(STDIN) > 1:
        raise FlagError("FILE: - (standard input) is given more than once; it can be read once")
    config = read_configuration(args.config) if args.config else None
    gates = effective_gates(args.feature_gates, config)
    for warning in [*(config.warnings() if config is not None else ()), *gates.warnings()]:
        print(f"warning: {one_line(warning)}", file=sys.stderr)
    objects: list[tuple[str, dict]] = []
    # a one-shot run of objects read, parsed and kept until the end: the cyclic garbage
    # collector would only walk them again and again (a third of a 15,000-workload pass)
    gc.disable()
    for path in args.files:
        objects.extend((source_name(path), obj) for obj in read_objects(path))
    result = simulate(objects, gates=gates, now=now, cycles=cycles, config=config,
                      warn=lambda msg: print(f"warning: {one_line(msg)}", file=sys.stderr))
    sys.stdout.write(render(result, args.output, by_hostname_prefix=gates.TASAssignmentsEncodingByHostnamePrefix))
    for problem in result.problems:
        print(f"error: {problem}", file=sys.stderr)
    return 1 if result.problems else 0


def _cmd_encode(args: argparse.Namespace) -> int:
    from scheduler.codec import decode_assignment, encode_assignment
    from scheduler.loader import read_document, source_name

    gates = FeatureGates.parse(args.feature_gates)
    doc = read_document(args.file)
    try:
        assignment = decode_assignment(doc)
    except InputError as exc:
        raise exc.located(file=source_name(args.file)) from None
    encoded = encode_assignment(
        assignment,
        by_hostname_prefix=gates.TASAssignmentsEncodingByHostnamePrefix,
        compact=args.compact,
    )
    print(json.dumps(encoded))
    return 0


def _cmd_decode(args: argparse.Namespace) -> int:
    from scheduler.codec import decode_document
    from scheduler.loader import read_document, source_name

    doc = read_document(args.file)
    try:
        decoded = decode_document(doc)
    except InputError as exc:
        raise exc.located(file=source_name(args.file)) from None
    print(json.dumps(decoded))
    return 0


COMMANDS = {"simulate": _cmd_simulate, "encode": _cmd_encode, "decode": _cmd_decode}


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        return COMMANDS[args.command](args)
    except FlagError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except BrokenPipeError:  # `tas simulate ... | head`
        return 0
    except MemoryError:  # input under the size limit can still be too much for this machine
        print("error: out of memory (lower TAS_MAX_INPUT_BYTES or give the process more memory)", file=sys.stderr)
        return 1
