"""Open-loop load (issue 22): requests at a fixed arrival rate, latency from each request's intended send time.

wrk (closed loop) sends a connection's next request only when its last answer came: a slow server slows the
client down, and the requests it would have sent meanwhile are never counted (coordinated omission). Here the
send times are a schedule (request i at t0 + i / rate), and a request's latency runs from its *intended* send
time to the end of its answer, so time spent waiting for a free connection, or behind a server's backlog, counts.
Debian has no wrk2, so this is Python: asyncio (uvloop when installed), raw HTTP/1.1 keep-alive connections (no
client library's per-request cost), one scheduler and `connections` senders taking requests from one queue.

Capacity at a latency target: the rate steps up (start, x factor each step) on one service, each step `seconds`
long after the connections are warm, until a step's P95 passes the target (or a request fails or times out); the
highest rate that held it is the capacity. The generator reports its own overhead: how late the scheduler put
requests on the queue (its lag: a generator that cannot keep its schedule would measure itself) and the CPU this
process spent per request.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import statistics
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from bench.scenario import Request

ANSWER_TIMEOUT = 10.0  # seconds a request may take from its intended send time; later counts as a timeout


def _percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100) of unsorted values; inf when there are none."""
    if not values:
        return math.inf
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q / 100 * len(ordered)) - 1))]


def encode(request: Request, host: str) -> bytes:
    body = (request.body or "").encode()
    lines = [f"{request.method} {request.path} HTTP/1.1", f"Host: {host}"]
    lines += [f"{name}: {value}" for name, value in request.headers.items()]
    if request.body is not None:
        lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


async def _read_answer(reader: asyncio.StreamReader) -> tuple[int, bool]:
    """(status, whether the server keeps the connection) of one HTTP/1.1 answer, its body read and dropped."""
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ", 2)[1])
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip().lower()
    if "content-length" in headers:
        await reader.readexactly(int(headers["content-length"]))
    elif headers.get("transfer-encoding") == "chunked":
        while True:
            size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
            await reader.readexactly(size + 2)
            if size == 0:
                break
    return status, headers.get("connection") != "close"


@dataclass
class _Batch:
    """One step's requests: how many are still unanswered, and an event set when none is."""

    remaining: int
    done: asyncio.Event = field(default_factory=asyncio.Event)

    def finish(self) -> None:
        self.remaining -= 1
        if self.remaining == 0:
            self.done.set()


@dataclass
class _Sent:
    intended: float
    batch: _Batch
    latency: float | None = None  # seconds from the intended time to the answer's end
    status: int | None = None
    error: str | None = None


@dataclass
class Step:
    rate: float
    seconds: float
    scheduled: int
    answered: int
    non_2xx: int
    errors: int
    timeouts: int
    achieved_per_s: float
    latency_ms: dict[str, float]
    scheduler_lag_ms: dict[str, float]  # how late the generator itself queued requests
    generator_cpu_ms_per_request: float
    held: bool = False

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Generator:
    """`connections` keep-alive connections to host:port sending `requests` in turn, on the schedule of each step."""

    host: str
    port: int
    requests: list[Request]
    connections: int
    _queue: asyncio.Queue[_Sent | None] = field(default_factory=asyncio.Queue)
    _payloads: list[bytes] = field(default_factory=list)
    _next: int = 0
    _senders: list[asyncio.Task[None]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._payloads = [encode(r, f"{self.host}:{self.port}") for r in self.requests]

    async def start(self) -> None:
        self._senders = [asyncio.create_task(self._sender(n)) for n in range(self.connections)]

    async def stop(self) -> None:
        for task in self._senders:
            task.cancel()
        for task in self._senders:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _sender(self, n: int) -> None:
        reader: asyncio.StreamReader | None = None
        writer: asyncio.StreamWriter | None = None
        try:
            while True:
                sent = await self._queue.get()
                if sent is None:
                    continue
                payload = self._payloads[self._next % len(self._payloads)]
                self._next += 1
                try:
                    if writer is None or reader is None:
                        reader, writer = await asyncio.open_connection(self.host, self.port)
                    writer.write(payload)
                    status, keep = await _read_answer(reader)
                    sent.latency, sent.status = time.perf_counter() - sent.intended, status
                    if not keep:
                        writer.close()
                        reader = writer = None
                except (OSError, asyncio.IncompleteReadError, ValueError, IndexError) as exc:
                    sent.error = type(exc).__name__
                    if writer is not None:
                        writer.close()
                    reader = writer = None
                sent.batch.finish()
        finally:
            if writer is not None:
                writer.close()

    async def step(self, rate: float, seconds: float, target_p95_ms: float) -> Step:
        """Send round(rate * seconds) requests on the schedule t0 + i / rate; wait for every answer (at most
        ANSWER_TIMEOUT after the last intended time); summarise."""
        total = max(1, round(rate * seconds))
        batch = _Batch(total)
        sent: list[_Sent] = []
        lags: list[float] = []
        cpu_start = time.process_time()
        t0 = time.perf_counter() + 0.05
        for i in range(total):
            intended = t0 + i / rate
            delay = intended - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            lags.append(max(0.0, time.perf_counter() - intended))
            item = _Sent(intended, batch)
            sent.append(item)
            self._queue.put_nowait(item)
        end = t0 + (total - 1) / rate
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(batch.done.wait(), max(0.0, end + ANSWER_TIMEOUT - time.perf_counter()))
        finished = time.perf_counter()
        cpu = time.process_time() - cpu_start
        # Requests still queued or in flight at the deadline are timeouts; drop the queued ones.
        while not self._queue.empty():
            self._queue.get_nowait()
        answered = [s for s in sent if s.latency is not None]
        timeouts = sum(1 for s in sent if s.latency is None and s.error is None)
        errors = sum(1 for s in sent if s.error is not None)
        non_2xx = sum(1 for s in answered if not 200 <= (s.status or 0) < 300)
        # Latency over every scheduled request: a failed or unanswered one counts as infinitely late.
        latencies = [s.latency * 1000 if s.latency is not None and s.error is None else math.inf for s in sent]
        finite = [v for v in latencies if math.isfinite(v)]
        latency = {"p50": _percentile(latencies, 50), "p95": _percentile(latencies, 95),
                   "p99": _percentile(latencies, 99), "max": max(latencies),
                   "mean": statistics.fmean(finite) if finite else math.inf}
        lag_ms = [v * 1000 for v in lags]
        last_answer = max((s.intended + (s.latency or 0.0) for s in answered), default=finished)
        result = Step(
            rate=rate, seconds=seconds, scheduled=total, answered=len(answered), non_2xx=non_2xx, errors=errors,
            timeouts=timeouts, achieved_per_s=len(answered) / max(1e-9, last_answer - t0),
            latency_ms={k: round(v, 3) for k, v in latency.items()},
            scheduler_lag_ms={"p50": round(_percentile(lag_ms, 50), 3), "p99": round(_percentile(lag_ms, 99), 3),
                              "max": round(max(lag_ms), 3)},
            generator_cpu_ms_per_request=round(cpu * 1000 / total, 4))
        result.held = (latency["p95"] <= target_p95_ms and not non_2xx and not errors and not timeouts)
        return result


async def _capacity(host: str, port: int, requests: list[Request], *, connections: int, start: float, factor: float,
                    seconds: float, warmup: float, target_p95_ms: float, max_steps: int,
                    log: Any) -> dict[str, Any]:
    generator = Generator(host, port, requests, connections)
    await generator.start()
    steps: list[Step] = []
    try:
        if warmup > 0:
            await generator.step(start, warmup, target_p95_ms)  # connections opened, pools and plans warm
        rate = start
        for _ in range(max_steps):
            step = await generator.step(rate, seconds, target_p95_ms)
            steps.append(step)
            log(f"  {rate:8.1f}/s: P95 {step.latency_ms['p95']:9.2f} ms, P99 {step.latency_ms['p99']:9.2f} ms, "
                f"answered {step.answered}/{step.scheduled}, non-2xx {step.non_2xx}, errors {step.errors}, "
                f"timeouts {step.timeouts}; generator lag P99 {step.scheduler_lag_ms['p99']:.2f} ms, "
                f"CPU {step.generator_cpu_ms_per_request:.3f} ms/request; "
                f"{'held' if step.held else 'PASSED THE TARGET'}")
            if not step.held:
                break
            rate = round(rate * factor, 1)
            await asyncio.sleep(1.0)  # let the last step's backlog drain
    finally:
        await generator.stop()
    held = [s for s in steps if s.held]
    return {"capacity_per_s": held[-1].rate if held else 0.0, "steps": [s.to_dict() for s in steps]}


def capacity(base_url: str, requests: list[Request], **options: Any) -> dict[str, Any]:
    """The highest arrival rate (requests/s) of the step series at which one service's P95 held the target."""
    host, _, port = base_url.removeprefix("http://").partition(":")
    try:
        import uvloop
    except ImportError:
        return asyncio.run(_capacity(host, int(port), requests, **options))
    return uvloop.run(_capacity(host, int(port), requests, **options))


def table(results: dict[str, Any]) -> str:
    """Markdown: each series' capacity on both sides and the ratio, then every step."""
    o = results["open_loop"]["options"]
    m = results["machine"]
    data = ", ".join(f"{k}={v}" for k, v in results["data"].items()) or "none"
    lines = [
        f"## {results['scenario']} (open loop): {results['description']}", "",
        f"Run {results['started_at']}. Machine: {m['cpu_count']} CPUs, Python {m['python']}, PostgreSQL "
        f"{m['postgresql_version']} ({results['database']['mode']}), {results['parameters']['workers']} API processes "
        f"each side. Data: {data}.",
        f"Arrival rate from {o['start']:g}/s, x{o['factor']:g} per step of {o['seconds']:g} s (after {o['warmup']:g} s "
        f"of warm-up), {o['connections']} generator connections, until P95 > {o['target_p95_ms']:g} ms, a failure or "
        "a timeout; latency from each request's intended send time (bench/openloop.py).", "",
        f"| Series | Tenet: highest rate with P95 <= {o['target_p95_ms']:g} ms (req/s) | Baseline (req/s) | "
        "Tenet / baseline |", "| --- | ---: | ---: | ---: |",
    ]
    series = results["open_loop"]["series"]
    for name, sides in series.items():
        tenet, base = sides["tenet"]["capacity_per_s"], sides["baseline"]["capacity_per_s"]
        lines.append(f"| {name} | {tenet:,.1f} | {base:,.1f} | {f'{tenet / base:.2f}' if base else 'n/a'} |")
    lines += ["", "| Series | Side | Rate (/s) | Achieved (/s) | P50 | P95 | P99 (ms) | Answered | "
              "non-2xx / errors / timeouts | Generator lag P99 / max (ms) | Generator CPU ms/req |",
              "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- | ---: |"]
    for name, sides in series.items():
        for side in ("tenet", "baseline"):
            for s in sides[side]["steps"]:
                lat = s["latency_ms"]
                lines.append(
                    f"| {name} | {side} | {s['rate']:,.1f} | {s['achieved_per_s']:,.1f} | {lat['p50']:.1f} | "
                    f"{lat['p95']:.1f} | {lat['p99']:.1f} | {s['answered']}/{s['scheduled']} | {s['non_2xx']} / "
                    f"{s['errors']} / {s['timeouts']} | {s['scheduler_lag_ms']['p99']:.2f} / "
                    f"{s['scheduler_lag_ms']['max']:.2f} | {s['generator_cpu_ms_per_request']:.3f} |")
    return "\n".join(lines) + "\n"
