"""A shaping TCP proxy on the loopback: a home uplink between a tool and its S3 server.

Every byte crossing it waits the one-way delay (half the round-trip time, plus optional
jitter, never reordering a connection's bytes); the client-to-server direction is the
uplink and shares one rate among all connections, as a home router's upstream does; the
other direction gets its own rate (0: unlimited) and the same delay. TCP-agnostic: HTTPS
passes through untouched (the certificate names 127.0.0.1, as the server's does).

What it does not model: the loopback's own TCP sees no loss and a tiny round trip, so
congestion windows grow as on a LAN; what a tool pays here is the per-request round
trips (a PUT waits for its answer) and the shared uplink's rate. The bottleneck's queue
is bounded (`queue_ms` of sending, like a router's buffer) and the proxy's sockets get
small buffers, so a sender feels the uplink's pace instead of filling megabytes of
kernel buffers at loopback speed.

    shaper = Shaper(upstream_port, rtt_ms=40, up_mbit=20).start()
    ... point the tools at shaper.url() (or url("https")) ...
    shaper.stats()   # bytes each way, first and last byte's time
    shaper.stop()
"""
from __future__ import annotations

import asyncio
import random
import socket
import threading
import time

CHUNK = 16 << 10
SOCKET_BUFFER = 64 << 10


class Link:
    """One direction of the line: a rate shared by every connection on it, and a queue
    limit. `schedule` books `n` bytes on the wire and says when their sending ends."""

    def __init__(self, mbit: float, queue_ms: float):
        self.rate = mbit * 1e6 / 8 if mbit > 0 else 0.0    # bytes per second; 0: no limit
        self.queue_s = queue_ms / 1000
        self.next_free = 0.0
        self.bytes = 0
        self.first: float | None = None
        self.last: float | None = None
        # (when the sending ended, bytes so far): the rate over any stretch of the run.
        self.marks: list[tuple[float, int]] = []

    def backlog(self, now: float) -> float:
        return max(0.0, self.next_free - now)

    def schedule(self, n: int, now: float) -> float:
        start = max(now, self.next_free)
        end = start + (n / self.rate if self.rate else 0.0)
        self.next_free = end
        self.bytes += n
        self.first = start if self.first is None else self.first
        self.last = end
        self.marks.append((end, self.bytes))
        return end

    def rate_between(self, low: float, high: float) -> float:
        """Bytes per second while the fractions `low` to `high` of the bytes were sent (the
        middle of a transfer, without its start and its tail): the least-squares slope of
        bytes over time, so that a sender's bursts (a whole photo at the line's rate, then
        a wait) do not make the figure depend on where the window's edges fall."""
        total = self.marks[-1][1] if self.marks else 0
        points = [m for m in self.marks if total * low <= m[1] <= total * high]
        if len(points) < 2:
            return 0.0
        n = len(points)
        mt = sum(t for t, _ in points) / n
        mb = sum(b for _, b in points) / n
        var = sum((t - mt) ** 2 for t, _ in points)
        return sum((t - mt) * (b - mb) for t, b in points) / var if var > 0 else 0.0


class Shaper:
    def __init__(self, upstream_port: int, rtt_ms: float, up_mbit: float, down_mbit: float = 0.0,
                 jitter_ms: float = 0.0, queue_ms: float = 50.0, upstream_host: str = "127.0.0.1", seed: int = 2026):
        self.upstream = (upstream_host, upstream_port)
        self.delay = rtt_ms / 2000
        self.jitter = jitter_ms / 1000
        self.up, self.down = Link(up_mbit, queue_ms), Link(down_mbit, queue_ms)
        self.connections = 0
        self._rng = random.Random(seed)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="shaper", daemon=True)
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        # Set before listen: accepted sockets inherit it.
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, SOCKET_BUFFER)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(256)
        self.port = self._listener.getsockname()[1]
        self._server = None

    def url(self, scheme: str = "http") -> str:
        return f"{scheme}://127.0.0.1:{self.port}"

    def start(self) -> "Shaper":
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._serve(), self._loop).result(10)
        return self

    def stop(self) -> None:
        async def close():
            if self._server:
                self._server.close()
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        asyncio.run_coroutine_threadsafe(close(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()

    def stats(self) -> dict:
        """Bytes each way, and the uplink's first and last byte on the wire (monotonic s)."""
        return {"connections": self.connections,
                "up": {"bytes": self.up.bytes, "first": self.up.first, "last": self.up.last},
                "down": {"bytes": self.down.bytes, "first": self.down.first, "last": self.down.last}}

    def reset_stats(self) -> None:
        for link in (self.up, self.down):
            link.bytes, link.first, link.last, link.marks = 0, None, None, []

    async def _serve(self):
        self._server = await asyncio.start_server(self._connection, sock=self._listener, limit=CHUNK)

    async def _connection(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter):
        self.connections += 1
        try:
            sock = socket.create_connection(self.upstream)
        except OSError:
            client_w.close()
            return
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, SOCKET_BUFFER)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.setblocking(False)
        server_r, server_w = await asyncio.open_connection(sock=sock, limit=CHUNK)
        await asyncio.gather(self._pipe(client_r, server_w, self.up), self._pipe(server_r, client_w, self.down),
                             return_exceptions=True)

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, link: Link):
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue = asyncio.Queue()

        async def deliver():
            try:
                while True:
                    at, data = await queue.get()
                    wait = at - loop.time()
                    if wait > 0:
                        await asyncio.sleep(wait)
                    if data is None:
                        if writer.can_write_eof():
                            writer.write_eof()
                        return
                    writer.write(data)
                    await writer.drain()
            except (ConnectionError, OSError):
                pass

        sender = asyncio.create_task(deliver())
        latest = 0.0
        try:
            while True:
                # The bottleneck's queue is full: stop reading, the sender's TCP feels it.
                while (backlog := link.backlog(loop.time())) > link.queue_s:
                    await asyncio.sleep(backlog - link.queue_s)
                data = await reader.read(CHUNK)
                now = loop.time()
                if not data:
                    queue.put_nowait((max(latest, now + self.delay), None))
                    break
                sent = link.schedule(len(data), now)
                jitter = self._rng.uniform(0, self.jitter) if self.jitter else 0.0
                # A connection's bytes never overtake each other, whatever the jitter.
                latest = max(latest, sent + self.delay + jitter)
                queue.put_nowait((latest, data))
        except (ConnectionError, OSError):
            sender.cancel()
        await asyncio.gather(sender, return_exceptions=True)
        writer.close()
