"""Talks to `photolalad __preview-worker` directly, as the daemon does: a socket pair
on the worker's descriptor 3, one framed request with the photo's descriptor attached
(SCM_RIGHTS), one framed reply. For the sandbox and protocol tests and the benchmark."""
import array
import os
import socket
import struct
import subprocess


def _frame(body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + body


def _string(s: str) -> bytes:
    b = s.encode()
    return struct.pack(">I", len(b)) + b


class Reply:
    def __init__(self, body: bytes):
        at = 0

        def take(n):
            nonlocal at
            v = body[at:at + n]
            assert len(v) == n, "short reply"
            at += n
            return v

        def opt_string():
            if take(1)[0] == 0:
                return None
            (n,) = struct.unpack(">I", take(4))
            return take(n).decode()

        assert take(1)[0] == 1, "reply version"
        self.width, self.height = struct.unpack(">II", take(8))
        self.date_time_original = opt_string()
        self.offset_time_original = opt_string()
        self.quality = take(1)[0]
        self.failure = opt_string()
        self.jpeg = None
        if take(1)[0] == 1:
            (n,) = struct.unpack(">I", take(4))
            self.jpeg = take(n)
        assert at == len(body), "bytes after the reply"


class PreviewWorker:
    def __init__(self, binary, extra_args=(), env=None):
        parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock = parent
        child_fd = child.fileno()

        def to_fd3():
            os.dup2(child_fd, 3)

        self.proc = subprocess.Popen([binary, "__preview-worker", *extra_args], pass_fds=(child_fd, 3),
                                     preexec_fn=to_fd3, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL, env=env)
        child.close()
        hello = self._receive(timeout=60)
        if hello.failure:
            raise RuntimeError(f"worker did not start: {hello.failure}")

    def _receive(self, timeout=60) -> Reply:
        self.sock.settimeout(timeout)
        data = b""
        while len(data) < 4 or len(data) < 4 + struct.unpack(">I", data[:4])[0]:
            chunk = self.sock.recv(1 << 16)
            if not chunk:
                raise EOFError("the worker closed its end")
            data += chunk
        (n,) = struct.unpack(">I", data[:4])
        return Reply(data[4:4 + n])

    def read(self, path, fmt, want_thumbnail=True, timeout=60) -> Reply:
        fd = os.open(path, os.O_RDONLY)
        try:
            body = bytes([1]) + _string(fmt) + bytes([1 if want_thumbnail else 0])
            self.sock.sendmsg([_frame(body)], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [fd]))])
            return self._receive(timeout)
        finally:
            os.close(fd)

    def peak_rss_kib(self):
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
        return None

    def cpu_seconds(self):
        with open(f"/proc/{self.proc.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        tick = os.sysconf("SC_CLK_TCK")
        return (int(fields[11]) + int(fields[12])) / tick

    def close(self):
        self.sock.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
