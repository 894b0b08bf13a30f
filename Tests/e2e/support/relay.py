"""A TCP relay on loopback that passes bytes through untouched (TLS included) to one
upstream and counts the connections it accepts: how tests see how many connections a
client opened to a server whose traffic they cannot read (RGW's TLS frontend).

With `connect=True` it is an HTTP proxy that only does CONNECT: every tunnel, whatever
host it names, leads to the one upstream. That is how a test sends the daemon's
AWS-style requests (`CONNECT photolala.s3.us-east-1.amazonaws.com:443`) to a local RADOS
Gateway without /etc/hosts: the TLS handshake, the certificate check for the AWS name
and the SigV4 signature all stay end to end between the daemon and the gateway.

    relay = Relay(("127.0.0.1", rgw.tls_port)).start()     # relay.url, relay.stats()
"""
from __future__ import annotations

import select
import socket
import socketserver
import threading


class _Server(socketserver.ThreadingMixIn, socketserver.TCPServer):
    allow_reuse_address = True
    daemon_threads = True
    block_on_close = False


class Relay:
    def __init__(self, upstream: tuple[str, int], *, connect: bool = False, host: str = "127.0.0.1",
                 scheme: str = "http"):
        # `scheme` only names what flows through (the relay never looks): "https" when the
        # upstream speaks TLS, so `url` is what a client should be given.
        self.upstream, self.connect, self.host, self.scheme = upstream, connect, host, scheme
        self.port = 0
        self._lock = threading.Lock()
        self._stats = {"connections": 0, "tunnels": [], "bytes_up": 0, "bytes_down": 0}
        self._server: _Server | None = None
        self._stopping = threading.Event()

    @property
    def url(self) -> str:
        return f"{self.scheme}://{self.host}:{self.port}"

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def start(self) -> "Relay":
        relay = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self):
                relay._serve(self.request)

        self._server = _Server((self.host, 0), Handler)
        self.port = self._server.server_address[1]
        threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                         name="relay", daemon=True).start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        if self._server:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def stats(self) -> dict:
        with self._lock:
            return {**self._stats, "tunnels": list(self._stats["tunnels"])}

    def reset_stats(self) -> None:
        with self._lock:
            self._stats = {"connections": 0, "tunnels": [], "bytes_up": 0, "bytes_down": 0}

    def _serve(self, client: socket.socket) -> None:
        with self._lock:
            self._stats["connections"] += 1
        try:
            if self.connect:
                head = b""
                while b"\r\n\r\n" not in head:
                    chunk = client.recv(4096)
                    if not chunk or len(head) > 16384:
                        return
                    head += chunk
                line = head.split(b"\r\n", 1)[0].decode("latin-1").split()
                if len(line) < 2 or line[0].upper() != "CONNECT":
                    client.sendall(b"HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\n\r\n")
                    return
                with self._lock:
                    self._stats["tunnels"].append(line[1])
            upstream = socket.create_connection(self.upstream, timeout=10)
            if self.connect:
                client.sendall(b"HTTP/1.1 200 Connection Established\r\n\r\n")
            self._pump(client, upstream)
        except OSError:
            pass
        finally:
            client.close()

    def _pump(self, client: socket.socket, upstream: socket.socket) -> None:
        try:
            pairs = {client: (upstream, "bytes_up"), upstream: (client, "bytes_down")}
            while not self._stopping.is_set():
                readable, _, _ = select.select(list(pairs), [], [], 0.5)
                for s in readable:
                    data = s.recv(1 << 16)
                    if not data:
                        return
                    other, counter = pairs[s]
                    other.sendall(data)
                    with self._lock:
                        self._stats[counter] += len(data)
        finally:
            upstream.close()
