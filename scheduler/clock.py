"""Time arithmetic that cannot overflow.

Kubernetes times go up to the year 9999 and Kueue's durations up to Go's largest (about 292
years), so a deadline computed from valid input can fall past the last instant Python's
datetime holds. Such a deadline is "never" (`FAR_FUTURE`), not an OverflowError.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

FAR_FUTURE = datetime.max.replace(tzinfo=UTC)
FAR_PAST = datetime.min.replace(tzinfo=UTC)


def later(t: datetime, delta: timedelta | float) -> datetime:
    """`t` plus `delta` (a timedelta or seconds, either sign), saturated at the ends of time."""
    try:
        return t + (delta if isinstance(delta, timedelta) else timedelta(seconds=delta))
    except OverflowError:
        forward = delta > timedelta(0) if isinstance(delta, timedelta) else delta > 0
        return FAR_FUTURE if forward else FAR_PAST
