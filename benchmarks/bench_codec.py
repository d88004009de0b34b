"""Benchmark of the v1beta2 TopologyAssignment encoders on real-world node-naming schemes.

For each scheme (GKE, EKS and AKS style hostnames, one pod per node, names in sorted order as
Kueue lists equally loaded nodes) and each encoder (Kueue's single-slice encoding, Kueue's
choice with the hostname-prefix gate, and the compact encoder) it reports the encoded size,
the encode and decode times, and the largest node count whose encoding fits in 1.5 MiB, found
by bisection.

Size is ``len(json.dumps(encoded, separators=(",", ":")))``: the compact JSON of the
topologyAssignment alone, in bytes (the rest of the Workload needs room too).

    .venv/bin/python benchmarks/bench_codec.py           # the full run (several minutes)
    .venv/bin/python benchmarks/bench_codec.py --quick   # a smoke run (seconds)
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scheduler.assignment import HOSTNAME_LABEL, TopologyAssignment
from scheduler.codec import ETCD_OBJECT_LIMIT, decode_assignment, encode_assignment, encoded_size

BASE36 = "0123456789abcdefghijklmnopqrstuvwxyz"


def base36(number: int, width: int) -> str:
    digits = []
    for _ in range(width):
        number, digit = divmod(number, 36)
        digits.append(BASE36[digit])
    return "".join(reversed(digits))


@dataclass(frozen=True)
class Scheme:
    name: str
    example: str
    layout: str
    generate: Callable[[int, random.Random], list[str]]


def gke_names(nodes: int, rng: random.Random, *, nodes_per_pool: int = 64) -> list[str]:
    """``gke-<cluster>-<pool>-<hash>-<4 chars>``: one single-zone node pool per accelerator
    slice (a TPU v5p-512 slice is 64 VMs), its instance group named by an 8-hex hash, and
    nodes by 4 random base-36 characters."""
    names: list[str] = []
    pool = 0
    while len(names) < nodes:
        group_hash = f"{rng.getrandbits(32):08x}"
        size = min(nodes_per_pool, nodes - len(names))
        suffixes = rng.sample(range(36**4), size)
        names += [f"gke-ml-train-tpu-slice-{pool:04d}-{group_hash}-{base36(s, 4)}" for s in suffixes]
        pool += 1
    return sorted(names)


def eks_names(nodes: int, rng: random.Random, *, addresses_per_node: int = 16) -> list[str]:
    """``ip-10-a-b-c.us-west-2.compute.internal``: node addresses in 10.16.0.0 and up, sparse
    because the VPC CNI hands the subnets' other addresses to pods."""
    start = (16 << 16) | 0  # 10.16.0.0
    names = []
    for offset in rng.sample(range(nodes * addresses_per_node), nodes):
        address = start + offset
        names.append(f"ip-10-{address >> 16 & 255}-{address >> 8 & 255}-{address & 255}.us-west-2.compute.internal")
    return sorted(names)


def aks_names(nodes: int, rng: random.Random, *, nodes_per_pool: int = 100) -> list[str]:
    """``aks-<pool>-<8 digits>-vmss<6 chars>``: one scale set per pool, instance ids in base 36,
    mostly consecutive with gaps left by scale-downs."""
    names: list[str] = []
    pool = 0
    while len(names) < nodes:
        size = min(nodes_per_pool, nodes - len(names))
        first = rng.randrange(2000)
        ids = sorted(rng.sample(range(first, first + size + size // 5), size))
        scale_set = f"{rng.randrange(10**8):08d}"
        names += [f"aks-gpupool{pool:03d}-{scale_set}-vmss{base36(i, 6)}" for i in ids]
        pool += 1
    return sorted(names)


SCHEMES = [
    Scheme(
        "GKE",
        "gke-ml-train-tpu-slice-0042-1f0e3d2c-k3x9",
        "a single-zone node pool of 64 nodes per accelerator slice",
        gke_names,
    ),
    Scheme(
        "EKS",
        "ip-10-17-4-201.us-west-2.compute.internal",
        "1 node per 16 addresses from 10.16.0.0",
        eks_names,
    ),
    Scheme(
        "AKS",
        "aks-gpupool042-48213307-vmss00001a",
        "scale sets of 100 nodes, base-36 instance ids",
        aks_names,
    ),
]


@dataclass(frozen=True)
class Encoder:
    name: str
    encode: Callable[[TopologyAssignment], dict]


ENCODERS = [
    Encoder("single-slice", lambda a: encode_assignment(a, by_hostname_prefix=False)),
    Encoder("hostname-prefix", lambda a: encode_assignment(a)),
    Encoder("compact", lambda a: encode_assignment(a, compact=True)),
]


def assignment_for(scheme: Scheme, nodes: int, seed: int = 0) -> TopologyAssignment:
    names = scheme.generate(nodes, random.Random(f"{scheme.name}-{nodes}-{seed}"))
    return TopologyAssignment.of([HOSTNAME_LABEL], [([name], 1) for name in names])


@dataclass(frozen=True)
class Timing:
    wall: float  # seconds, median
    cpu: float  # seconds of this process's CPU time, median: what other load on the machine affects least


def timed(action: Callable[[], object], repeat: int) -> tuple[object, Timing]:
    """The action's result and its median wall and CPU times."""
    walls, cpus, result = [], [], None
    for _ in range(repeat):
        wall, cpu = time.perf_counter(), time.process_time()
        result = action()
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
    return result, Timing(statistics.median(walls), statistics.median(cpus))


def fits(scheme: Scheme, encoder: Encoder, nodes: int) -> bool:
    return encoded_size(encoder.encode(assignment_for(scheme, nodes))) <= ETCD_OBJECT_LIMIT


def max_nodes(scheme: Scheme, encoder: Encoder, step: int, ceiling: int) -> int:
    """The largest multiple of ``step`` nodes that fits, by bisection between one that fits
    and one that does not (sizes grow with the node count, save at Kueue's slice-limit cliff,
    where bisection finds the cliff)."""
    low, high = 0, step
    while fits(scheme, encoder, high):
        low, high = high, high * 2
        if high > ceiling:
            return low
    while high - low > step:
        middle = (low + high) // 2 // step * step
        low, high = (middle, high) if fits(scheme, encoder, middle) else (low, middle)
    return low


def print_table(headers: list[str], rows: list[list[str]]) -> None:
    widths = [max(len(str(cell)) for cell in column) for column in zip(headers, *rows, strict=True)]
    line = "  ".join(f"{{:>{w}}}" for w in widths)
    print(line.format(*headers))
    print("  ".join("-" * w for w in widths))
    for row in rows:
        print(line.format(*row))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes and a coarse search: a smoke run")
    parser.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    args = parser.parse_args(argv)

    sizes = [2_000, 10_000] if args.quick else [10_000, 50_000, 100_000, 200_000]
    step, ceiling = (5_000, 40_000) if args.quick else (1_000, 2_000_000)
    print("Size: len(json.dumps(topologyAssignment, separators=(',', ':'))) in bytes; one pod per node;")
    print(f"limit {ETCD_OBJECT_LIMIT:,} bytes (1.5 MiB). Times: median wall time of the codec alone, in ms.\n")
    for scheme in SCHEMES:
        print(f"{scheme.name}: {scheme.example}  ({scheme.layout})")
    print()

    load_before = os.getloadavg()[0]
    results: dict = {"sizes": [], "maxNodes": {}}
    rows = []
    for scheme in SCHEMES:
        for nodes in sizes:
            assignment = assignment_for(scheme, nodes)
            for encoder in ENCODERS:
                repeat = 1 if encoder.name == "compact" or nodes > 100_000 else 3
                encoded, encode_t = timed(lambda e=encoder, a=assignment: e.encode(a), repeat)
                wire = json.loads(json.dumps(encoded))
                decoded, decode_t = timed(lambda w=wire: decode_assignment(w), repeat)
                assert decoded.domains == assignment.domains, (scheme.name, nodes, encoder.name)
                size = encoded_size(encoded)
                results["sizes"].append(
                    {
                        "scheme": scheme.name,
                        "nodes": nodes,
                        "encoder": encoder.name,
                        "bytes": size,
                        "slices": len(encoded["slices"]),
                        "encodeSeconds": encode_t.wall,
                        "decodeSeconds": decode_t.wall,
                        "encodeCpuSeconds": encode_t.cpu,
                        "decodeCpuSeconds": decode_t.cpu,
                    }
                )
                rows.append(
                    [
                        scheme.name,
                        f"{nodes:,}",
                        encoder.name,
                        f"{len(encoded['slices']):,}",
                        f"{size:,}",
                        f"{size / nodes:.2f}",
                        "yes" if size <= ETCD_OBJECT_LIMIT else "no",
                        f"{encode_t.wall * 1000:,.0f}",
                        f"{decode_t.wall * 1000:,.0f}",
                    ]
                )
    print_table(["scheme", "nodes", "encoder", "slices", "bytes", "bytes/node", "fits", "encode ms", "decode ms"], rows)

    print(f"\nLargest node count under 1.5 MiB (bisection, {step:,}-node steps, + = at the {ceiling:,} ceiling):\n")
    rows = []
    for scheme in SCHEMES:
        found = {encoder.name: max_nodes(scheme, encoder, step, ceiling) for encoder in ENCODERS}
        results["maxNodes"][scheme.name] = found
        ratio = found["compact"] / found["hostname-prefix"] if found["hostname-prefix"] else float("inf")
        cells = [f"{found[e.name]:,}" + ("+" if found[e.name] >= ceiling else "") for e in ENCODERS]
        capped = found["compact"] >= ceiling or found["hostname-prefix"] >= ceiling
        rows.append([scheme.name, *cells, "n/a (ceiling)" if capped else f"{ratio:.2f}x"])
    print_table(["scheme", *(e.name for e in ENCODERS), "compact / hostname-prefix"], rows)

    kueue_100k = [r for r in results["sizes"] if r["nodes"] == 100_000 and r["encoder"] != "compact"]
    if kueue_100k:
        wall = max(r["encodeSeconds"] + r["decodeSeconds"] for r in kueue_100k)
        cpu = max(r["encodeCpuSeconds"] + r["decodeCpuSeconds"] for r in kueue_100k)
        print(
            f"\nKueue encoders at 100,000 nodes, slowest case: encode + decode {wall:.2f} s wall, {cpu:.2f} s CPU"
            f" (target 1 s); load average {load_before:.1f} before the run, {os.getloadavg()[0]:.1f} after"
        )
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
