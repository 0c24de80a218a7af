"""Where capture records go: the endpoint's capture log group, one stream per adapter.

SageMaker sends the container's standard output to a stream it names after the instance, so a
record written there sits beside every other tenant's. The construct therefore creates a capture
log group and names it in ``CDK_ADAPTERS_CAPTURE_LOG_GROUP``; `CloudWatchCaptureLog` writes each
record to its adapter's stream (`capture_record.capture_stream`), where a reader granted that one
stream sees that one tenant. Writing happens on a background thread, in batches: a request never
waits for CloudWatch, and a CloudWatch failure drops records (counted, and said once per kind in
the log) but never fails a request. Without the variable (local mode) records go to standard output.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

from adapter_server import observability
from cdk_adapters.contract import capture_record

MAX_QUEUED = 10_000
"""Records waiting to be written; past it new records are dropped (and counted)."""
FLUSH_INTERVAL_S = 1.0
MAX_BATCH_EVENTS = 10_000
MAX_BATCH_BYTES = 1_048_576
"""PutLogEvents' limits: 10,000 events and 1 MiB per call, each event counting 26 bytes more."""
EVENT_OVERHEAD_BYTES = 26


class CaptureLog(Protocol):
    def write(self, stream: str, line: str) -> None: ...


class StandardOutputCaptureLog:
    """Local mode: records on standard output, as every other log line."""

    def write(self, stream: str, line: str) -> None:
        observability.write_line(line)


class CloudWatchCaptureLog:
    """Records to `group`, one stream per adapter, written in batches by a daemon thread."""

    def __init__(self, group: str, client: Any, *, flush_interval_s: float = FLUSH_INTERVAL_S) -> None:
        self.group = group
        self._client = client
        self._flush_interval_s = flush_interval_s
        self._queue: queue.Queue[tuple[str, int, str] | None] = queue.Queue(MAX_QUEUED)
        self._streams: set[str] = set()
        self._reported: set[str] = set()
        self.dropped = 0
        """Records not written (queue full or CloudWatch refused them)."""
        self._thread = threading.Thread(target=self._run, name="capture-log", daemon=True)
        self._thread.start()

    def write(self, stream: str, line: str) -> None:
        try:
            self._queue.put_nowait((stream, int(time.time() * 1000), line))
        except queue.Full:
            self._drop("queue_full", 1)

    def close(self, timeout_s: float = 5.0) -> None:
        """Write what is queued, then stop the thread."""
        self._queue.put(None)
        self._thread.join(timeout_s)

    def _run(self) -> None:
        while True:
            batch: dict[str, list[tuple[int, str]]] = {}
            stop = self._collect(batch)
            for stream, events in batch.items():
                self._put(stream, events)
            if stop:
                return

    def _collect(self, batch: dict[str, list[tuple[int, str]]]) -> bool:
        """Wait for one record, then take what else arrives within the flush interval; True on close."""
        item = self._queue.get()
        deadline = time.monotonic() + self._flush_interval_s
        while item is not None:
            stream, timestamp, line = item
            batch.setdefault(stream, []).append((timestamp, line))
            left = deadline - time.monotonic()
            try:
                item = self._queue.get(timeout=left) if left > 0 else self._queue.get_nowait()
            except queue.Empty:
                return False
        return True

    def _put(self, stream: str, events: list[tuple[int, str]]) -> None:
        if stream not in self._streams and not self._create_stream(stream):
            self._drop("create_stream_failed", len(events))
            return
        for chunk in _chunks(sorted(events, key=lambda event: event[0])):
            try:
                response = self._client.put_log_events(
                    logGroupName=self.group,
                    logStreamName=stream,
                    logEvents=[{"timestamp": timestamp, "message": message} for timestamp, message in chunk],
                )
            except Exception as error:
                self._drop(f"put_failed:{_error_code(error)}", len(chunk))
                continue
            rejected = response.get("rejectedLogEventsInfo") if isinstance(response, dict) else None
            if rejected:
                self._drop("events_rejected", _rejected_count(rejected, len(chunk)))

    def _create_stream(self, stream: str) -> bool:
        try:
            self._client.create_log_stream(logGroupName=self.group, logStreamName=stream)
        except Exception as error:
            if _error_code(error) != "ResourceAlreadyExistsException":
                return False
        self._streams.add(stream)
        return True

    def _drop(self, reason: str, count: int) -> None:
        self.dropped += count
        if reason not in self._reported:  # once per kind: a failing CloudWatch must not flood stdout
            self._reported.add(reason)
            observability.emit("capture_dropped", reason=reason, group=self.group, records=count)


def _chunks(events: list[tuple[int, str]]) -> list[list[tuple[int, str]]]:
    chunks: list[list[tuple[int, str]]] = [[]]
    size = 0
    for event in events:
        cost = len(event[1].encode("utf-8")) + EVENT_OVERHEAD_BYTES
        if chunks[-1] and (len(chunks[-1]) >= MAX_BATCH_EVENTS or size + cost > MAX_BATCH_BYTES):
            chunks.append([])
            size = 0
        chunks[-1].append(event)
        size += cost
    return chunks


def _error_code(error: Exception) -> str:
    response = getattr(error, "response", None)
    if isinstance(response, dict):
        return str(response.get("Error", {}).get("Code", type(error).__name__))
    return type(error).__name__


def _rejected_count(info: dict[str, Any], total: int) -> int:
    rejected: set[int] = set()
    if "tooNewLogEventStartIndex" in info:
        rejected.update(range(info["tooNewLogEventStartIndex"], total))
    if "tooOldLogEventEndIndex" in info:
        rejected.update(range(info["tooOldLogEventEndIndex"]))
    if "expiredLogEventEndIndex" in info:
        rejected.update(range(info["expiredLogEventEndIndex"]))
    return len(rejected)


def capture_log_for(group_arn: str | None, client_factory: Callable[[str], Any] | None = None) -> CaptureLog:
    """The capture log group `group_arn` names (`capture_record.CAPTURE_LOG_GROUP_ENV`), else standard output."""
    if group_arn is None:
        return StandardOutputCaptureLog()
    region, group = capture_record.log_group_from_arn(group_arn)
    return CloudWatchCaptureLog(group, (client_factory or _logs_client)(region))


def _logs_client(region: str) -> Any:
    import boto3  # the serving image has it; only a capture log group needs it

    return boto3.client("logs", region_name=region)
