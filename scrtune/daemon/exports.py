"""Goodput and badput out of the daemon: TensorBoard scalars (tensorboardX) when given a log
directory, Prometheus text metrics over HTTP when given a port. The HTTP server runs in its own
thread and only serves a text the loop replaces; it touches no ZeroMQ socket."""

from __future__ import annotations

import http.server
import logging
import threading

from scrtune.goodput.calculator import Report, compute
from scrtune.goodput.readers import read_store
from scrtune.goodput.store import Store

log = logging.getLogger("scrtune.daemon")


def job_reports(store: Store) -> dict[str, Report]:
    """Goodput per job recorded in the store (jobs whose events cannot be measured are left
    out)."""
    loaded = read_store(store.path)
    reports: dict[str, Report] = {}
    for job in sorted(loaded.jobs):
        loaded.log.select(job)
        try:
            reports[job] = compute(loaded.log)
        except ValueError:
            continue
    return reports


def label_value(text: str) -> str:
    """A Prometheus label value: backslash, double quote and newline escaped, as the text
    format requires, so a name cannot end the label or start a metric of its own."""
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


class Exports:
    def __init__(self, tensorboard_dir: str = "", metrics_port: int = 0,
                 metrics_host: str = "127.0.0.1") -> None:
        self._writer = None
        self._step = 0
        self._text = b"# no measurement yet\n"
        self._server: http.server.ThreadingHTTPServer | None = None
        if tensorboard_dir:
            from tensorboardX import SummaryWriter

            self._writer = SummaryWriter(tensorboard_dir)
        if metrics_port:
            self._serve(metrics_host, metrics_port)

    def _serve(self, host: str, port: int) -> None:
        exports = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (the http.server name)
                body = exports._text if self.path in ("/metrics", "/") else b"not found\n"
                self.send_response(200 if self.path in ("/metrics", "/") else 404)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                return

        self._server = http.server.ThreadingHTTPServer((host, port), Handler)
        threading.Thread(target=self._server.serve_forever, name="scrtune-metrics",
                         daemon=True).start()
        log.info("Prometheus metrics on http://%s:%d/metrics", host, port)

    def update(self, reports: dict[str, Report], counters: dict[str, float]) -> None:
        lines = ["# TYPE scrtune_goodput_percent gauge",
                 "# TYPE scrtune_badput_seconds gauge",
                 "# TYPE scrtune_intake counter"]
        for name, report in reports.items():
            job = label_value(name)  # a job name is the client's: it may hold anything
            lines.append(f'scrtune_goodput_percent{{job="{job}"}} {report.goodput_pct:.4f}')
            lines += [f'scrtune_badput_seconds{{job="{job}",bucket="{b}"}} {s:.3f}'
                      for b, s in report.badput_s.items()]
        lines += [f'scrtune_intake{{counter="{k}"}} {v}' for k, v in counters.items()]
        self._text = ("\n".join(lines) + "\n").encode()
        if self._writer is not None:
            self._step += 1
            for job, report in reports.items():
                self._writer.add_scalar(f"{job}/goodput_pct", report.goodput_pct, self._step)
                for bucket, seconds in report.badput_s.items():
                    self._writer.add_scalar(f"{job}/badput_s/{bucket}", seconds, self._step)
            self._writer.flush()

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
        if self._writer is not None:
            self._writer.close()
