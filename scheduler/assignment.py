"""The decoded TopologyAssignment: ordered (values, count) domains at the lowest level.

This is the one in-memory form the engine, the codec, the ungater and the service share.
The v1beta2 wire form lives in `scheduler.codec`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

HOSTNAME_LABEL = "kubernetes.io/hostname"


@dataclass(frozen=True, slots=True)
class DomainAssignment:
    """`count` pods in the domain named by one value per level of the assignment."""

    values: tuple[str, ...]
    count: int


@dataclass(frozen=True, slots=True)
class TopologyAssignment:
    levels: tuple[str, ...]
    domains: tuple[DomainAssignment, ...] = field(default_factory=tuple)

    @classmethod
    def of(cls, levels: Iterable[str], domains: Iterable[tuple[Iterable[str], int]]) -> TopologyAssignment:
        return cls(tuple(levels), tuple(DomainAssignment(tuple(v), int(c)) for v, c in domains))

    def __iter__(self) -> Iterator[DomainAssignment]:
        return iter(self.domains)

    def __len__(self) -> int:
        return len(self.domains)

    @property
    def pod_count(self) -> int:
        return sum(d.count for d in self.domains)

    def to_decoded_json(self) -> dict:
        """Kueue's v1beta1 / test form: {"levels": [...], "domains": [{"values": [...], "count": n}]}."""
        return {
            "levels": list(self.levels),
            "domains": [{"values": list(d.values), "count": d.count} for d in self.domains],
        }
