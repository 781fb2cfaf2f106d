"""Starts `lily serve` on a free loopback port for a test, and raw HTTP helpers."""
import json
import os
import re
import socket
import subprocess
import time
import urllib.request

LILY = os.environ.get("LILY_BINARY")
MODEL = os.environ.get("LILY_MODEL_DIR")


class Server:
    def __init__(self, *args):
        if not LILY or not MODEL:
            raise RuntimeError("LILY_BINARY and LILY_MODEL_DIR must be set")
        self.proc = subprocess.Popen([LILY, "serve", MODEL, "--port", "0", *args],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        self.log = ""
        deadline = time.time() + 60
        while True:
            line = self.proc.stderr.readline()
            self.log += line
            m = re.search(r"listening on http://[^:]+:(\d+)", line)
            if m:
                self.port = int(m.group(1))
                break
            if not line or time.time() > deadline:
                raise RuntimeError("lily serve did not start:\n" + self.log)
        while True:
            try:
                if self.get("/health")[0] == 200:
                    break
            except OSError:
                pass
            if time.time() > deadline:
                raise RuntimeError("the model did not load:\n" + self.log)
            time.sleep(0.05)

    def stop(self):
        """Stops the server; raises if it did not exit cleanly (a sanitizer's
        report at exit, a leak among them, makes the exit status non-zero)."""
        self.proc.terminate()
        try:
            self.proc.wait(timeout=60)
            self.log += self.proc.stderr.read()
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise
        finally:
            self.proc.stderr.close()
        if self.proc.returncode != 0:
            raise RuntimeError(f"lily serve exited with {self.proc.returncode}:\n{self.log[-4000:]}")

    def rss_mb(self):
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
        return 0.0

    def get(self, path, headers=None, timeout=10):
        req = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}", headers=headers or {})
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                return r.status, r.read()
        except urllib.error.HTTPError as e:
            return e.code, e.read()

    def post(self, path, body, headers=None, timeout=30):
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        req = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}", data=data,
                                     headers={"Content-Type": "application/json", **(headers or {})})
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                return r.status, r.read()
        except urllib.error.HTTPError as e:
            return e.code, e.read()

    def connect(self, timeout=10):
        s = socket.create_connection(("127.0.0.1", self.port), timeout=timeout)
        s.settimeout(timeout)
        return s


def read_all(sock):
    """Everything the server sends until it closes the connection."""
    out = b""
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            return out
        out += chunk


def read_response(sock, buf=b""):
    """One HTTP response with a Content-Length body: (status, headers, body, rest)."""
    while b"\r\n\r\n" not in buf:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("closed before a response head: %r" % buf)
        buf += chunk
    head, _, rest = buf.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    status = int(lines[0].split()[1])
    headers = {k.lower(): v.strip() for k, _, v in (l.partition(":") for l in lines[1:])}
    n = int(headers.get("content-length", "0"))
    while len(rest) < n:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("closed inside a body")
        rest += chunk
    return status, headers, rest[:n], rest[n:]
