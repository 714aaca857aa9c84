"""In-process counters and latency histograms, rendered in Prometheus text format."""

from __future__ import annotations

import threading
from collections import defaultdict

BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class Metrics:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.stores: dict[str, int] = defaultdict(int)
        self.recalls = 0
        self.calls: dict[tuple[str, bool], int] = defaultdict(int)
        self.hist: dict[str, list[int]] = {}
        self.hist_sum: dict[str, float] = defaultdict(float)
        self.pruned = 0
        self.consolidated = 0

    def observe(self, op: str, seconds: float, ok: bool) -> None:
        with self._lock:
            self.calls[(op, ok)] += 1
            h = self.hist.setdefault(op, [0] * (len(BUCKETS) + 1))
            for i, b in enumerate(BUCKETS):
                if seconds <= b:
                    h[i] += 1
                    break
            else:
                h[-1] += 1
            self.hist_sum[op] += seconds

    def stored(self, action: str) -> None:
        with self._lock:
            self.stores[action] += 1

    def recalled(self) -> None:
        with self._lock:
            self.recalls += 1

    def maintained(self, report: dict) -> None:
        with self._lock:
            self.pruned += int(report.get("pruned", 0) or 0)
            self.consolidated += int(report.get("consolidated", 0) or 0)

    def render(self, gauges: dict[str, list[tuple[dict[str, str], float]]] | None = None) -> str:
        """Prometheus text exposition (version 0.0.4)."""
        out: list[str] = []

        def lbl(d: dict[str, str]) -> str:
            if not d:
                return ""
            esc = {k: str(v).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") for k, v in d.items()}
            return "{" + ",".join(f'{k}="{v}"' for k, v in esc.items()) + "}"

        with self._lock:
            for name, series in (gauges or {}).items():
                out.append(f"# TYPE {name} gauge")
                for labels, v in series:
                    out.append(f"{name}{lbl(labels)} {v}")
            out.append("# HELP engram_stores_total Memories stored, by resolution action.")
            out.append("# TYPE engram_stores_total counter")
            for action in ("new", "reinforce", "merge", "replace"):
                out.append(f'engram_stores_total{{action="{action}"}} {self.stores.get(action, 0)}')
            out.append("# TYPE engram_recalls_total counter")
            out.append(f"engram_recalls_total {self.recalls}")
            out.append("# TYPE engram_pruned_total counter")
            out.append(f"engram_pruned_total {self.pruned}")
            out.append("# TYPE engram_consolidated_total counter")
            out.append(f"engram_consolidated_total {self.consolidated}")
            out.append("# TYPE engram_requests_total counter")
            for (op, ok), n in sorted(self.calls.items()):
                out.append(f'engram_requests_total{{op="{op}",outcome="{"ok" if ok else "error"}"}} {n}')
            out.append("# HELP engram_request_seconds Latency of engram operations.")
            out.append("# TYPE engram_request_seconds histogram")
            for op, h in sorted(self.hist.items()):
                cum = 0
                for b, c in zip(BUCKETS, h):
                    cum += c
                    out.append(f'engram_request_seconds_bucket{{op="{op}",le="{b}"}} {cum}')
                cum += h[-1]
                out.append(f'engram_request_seconds_bucket{{op="{op}",le="+Inf"}} {cum}')
                out.append(f'engram_request_seconds_sum{{op="{op}"}} {self.hist_sum[op]:.6f}')
                out.append(f'engram_request_seconds_count{{op="{op}"}} {cum}')
        return "\n".join(out) + "\n"
