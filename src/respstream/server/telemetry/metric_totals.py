"""Histogram observations and counter increments added up in plain Python, handed to prometheus-client before each
scrape: :class:`MetricTotals` (issue 41).

Why: prometheus-client takes a lock for every counter increment and two for every histogram observation (its sum,
then the bucket its linear scan of the bounds finds); a streaming response makes about a dozen of them, ~3% of a
short request's instructions. Here an observation is a ``bisect`` and two additions. :meth:`MetricTotals.publish`
adds the totals to each child's values (a histogram child's ``_sum`` and ``_buckets``: prometheus-client's own
attributes, checked by tests/observability/test_metric_totals.py) and runs before every render, so a scrape sees
every sample. Only for one process: in multiprocess mode another worker may render, so samples go straight through.
"""

from __future__ import annotations

from bisect import bisect_left
from typing import Any

__all__ = ["MetricTotals"]


class _Histogram:
    __slots__ = ("bounds", "child", "counts", "sum")

    def __init__(self, child: Any) -> None:
        self.child = child
        self.bounds: tuple[float, ...] = tuple(child._upper_bounds)  # ends with +Inf
        self.counts = [0] * len(self.bounds)
        self.sum = 0.0

    def publish(self) -> None:
        if self.sum:
            self.child._sum.inc(self.sum)
            self.sum = 0.0
        counts, buckets = self.counts, self.child._buckets
        for i, n in enumerate(counts):
            if n:
                buckets[i].inc(n)
                counts[i] = 0


def _child(metric: Any, labels: tuple[str, ...]) -> Any:
    return metric.labels(*labels) if labels else metric


class MetricTotals:
    """Pending samples of a :class:`~respstream.server.telemetry.metrics.Metrics`, one total per child."""

    def __init__(self) -> None:
        self._histograms: dict[Any, _Histogram] = {}
        self._counters: dict[Any, list[Any]] = {}  # key -> [child, pending increment]
        self._gauges: dict[Any, float] = {}  # gauge -> its latest value, not yet set

    def observe(self, metric: Any, labels: tuple[str, ...], value: float) -> None:
        """``metric.labels(*labels).observe(value)``, before the next :meth:`publish` (NaN goes straight through:
        it lands in no bucket)."""
        key = (id(metric), labels)
        totals = self._histograms.get(key)
        if totals is None:
            totals = self._histograms[key] = _Histogram(_child(metric, labels))
        if value != value:
            totals.child.observe(value)
            return
        totals.counts[bisect_left(totals.bounds, value)] += 1  # prometheus-client: the first bound >= value
        totals.sum += value

    def inc(self, metric: Any, labels: tuple[str, ...], amount: float = 1) -> None:
        """``metric.labels(*labels).inc(amount)``, before the next :meth:`publish`."""
        key = (id(metric), labels)
        pending = self._counters.get(key)
        if pending is None:
            pending = self._counters[key] = [_child(metric, labels), 0]
        if amount < 0:
            pending[0].inc(amount)  # refused (a counter only grows), as it would have been
        pending[1] += amount

    def set(self, gauge: Any, value: float) -> None:
        """``gauge.set(value)`` at the next :meth:`publish` (the latest value wins, as it would have)."""
        self._gauges[gauge] = value

    def publish(self) -> None:
        """Hand every pending total to prometheus-client."""
        for histogram in self._histograms.values():
            histogram.publish()
        for pending in self._counters.values():
            if pending[1]:
                pending[0].inc(pending[1])
                pending[1] = 0
        if self._gauges:
            gauges, self._gauges = self._gauges, {}
            for gauge, value in gauges.items():
                gauge.set(value)
