"""Prometheus text metrics, kept as plain counters (no client library; the format is simple and stable)."""

from __future__ import annotations

from collections import Counter

__all__ = ["Metrics"]


class Metrics:
    def __init__(self) -> None:
        self.requests: Counter[tuple[str, str, int]] = Counter()  # (method, route, status)
        self.responses: Counter[str] = Counter()  # terminal status
        self.tool_calls: Counter[tuple[str, str]] = Counter()  # (tool, status)
        self.upstream_failures: Counter[str] = Counter()  # error code
        self.upstream_repairs: Counter[str] = Counter()  # violation code repaired in a native Responses upstream
        self.events = 0
        self.active_streams = 0
        self.running_responses = 0

    def count_events(self, n: int) -> None:
        self.events += n

    def tool(self, name: str, status: str) -> None:
        self.tool_calls[(name, status)] += 1

    def render(self) -> str:
        lines = [
            "# HELP respstream_http_requests_total HTTP requests by method, route and status.",
            "# TYPE respstream_http_requests_total counter",
        ]
        for (method, route, code), n in sorted(self.requests.items()):
            lines.append(f'respstream_http_requests_total{{method="{method}",route="{route}",status="{code}"}} {n}')
        lines += ["# HELP respstream_responses_total Finished responses by final status.",
                  "# TYPE respstream_responses_total counter"]
        for status, n in sorted(self.responses.items()):
            lines.append(f'respstream_responses_total{{status="{status}"}} {n}')
        lines += ["# HELP respstream_tool_calls_total Server tool calls by tool and status.",
                  "# TYPE respstream_tool_calls_total counter"]
        for (tool, status), n in sorted(self.tool_calls.items()):
            lines.append(f'respstream_tool_calls_total{{tool="{tool}",status="{status}"}} {n}')
        lines += ["# HELP respstream_upstream_failures_total Upstream failures by error code.",
                  "# TYPE respstream_upstream_failures_total counter"]
        for err_code, n in sorted(self.upstream_failures.items()):
            lines.append(f'respstream_upstream_failures_total{{code="{err_code}"}} {n}')
        lines += ["# HELP respstream_upstream_repairs_total Protocol violations repaired in native Responses "
                  "upstream streams, by violation code.",
                  "# TYPE respstream_upstream_repairs_total counter"]
        for violation, n in sorted(self.upstream_repairs.items()):
            lines.append(f'respstream_upstream_repairs_total{{code="{violation}"}} {n}')
        lines += [
            "# HELP respstream_events_total Stream events emitted.",
            "# TYPE respstream_events_total counter",
            f"respstream_events_total {self.events}",
            "# HELP respstream_active_streams Open SSE connections.",
            "# TYPE respstream_active_streams gauge",
            f"respstream_active_streams {self.active_streams}",
            "# HELP respstream_running_responses Responses being generated.",
            "# TYPE respstream_running_responses gauge",
            f"respstream_running_responses {self.running_responses}",
        ]
        return "\n".join(lines) + "\n"
