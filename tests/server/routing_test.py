"""Hybrid routing end to end: lily serve with a deployment file, against a
recording fake cloud tier on loopback (plain HTTP, and TLS with a test CA).

Over a corpus of requests, adversarial ones included, no byte of
local-category data reaches the fake endpoint; cloud-eligible requests do,
and their answers (whole and streamed) arrive intact; every response says
where it ran; and the audit log accounts for every byte the endpoint received."""
import base64
import http.client
import json
import os
import shutil
import ssl
import subprocess
import tempfile
import threading
import unittest
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from lily_server import LILY, Server

CLOUD_TEXT = "Here is what the web says."
SSE_EVENTS = [
    {"id": "c1", "object": "chat.completion.chunk", "model": "big", "choices": [
        {"index": 0, "delta": {"role": "assistant", "content": "Here is "}, "finish_reason": None}]},
    {"id": "c1", "object": "chat.completion.chunk", "model": "big", "choices": [
        {"index": 0, "delta": {"content": "what the web says."}, "finish_reason": "stop"}]},
]
SSE_BODY = b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in SSE_EVENTS) + b"data: [DONE]\n\n"

WEB_TOOL = {"type": "function", "function": {"name": "web_search", "description": "Search the web.",
                                              "parameters": {"type": "object", "properties": {"q": {"type": "string"}}}}}
FILE_TOOL = {"type": "function", "function": {"name": "read_file", "description": "Read a file.",
                                               "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}}


class CountingReader:
    def __init__(self, raw, box):
        self.raw, self.box = raw, box

    def read(self, n=-1):
        data = self.raw.read(n)
        self.box.append(data)
        return data

    def readline(self, limit=-1):
        data = self.raw.readline(limit)
        self.box.append(data)
        return data

    def __getattr__(self, name):
        return getattr(self.raw, name)


class FakeCloud:
    """An OpenAI-compatible endpoint that records every byte it receives."""

    def __init__(self, tls_context=None, fail=False):
        self.received = []  # one bytes object per request, as received
        self.fail = fail
        cloud = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def setup(self):
                super().setup()
                self.box = []
                self.rfile = CountingReader(self.rfile, self.box)

            def log_message(self, *args):
                pass

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                cloud.received.append(b"".join(self.box))
                if cloud.fail:
                    self.send_response(500)
                    msg = b'{"error": {"message": "overloaded"}}'
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(msg)))
                    self.end_headers()
                    self.wfile.write(msg)
                    return
                req = json.loads(body)
                if req.get("stream"):
                    self.send_response(200)
                    self.send_header("Content-Type", "text/event-stream")
                    self.send_header("Transfer-Encoding", "chunked")
                    self.end_headers()
                    for piece in (SSE_BODY[:50], SSE_BODY[50:]):
                        self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
                        self.wfile.flush()
                    self.wfile.write(b"0\r\n\r\n")
                    return
                answer = json.dumps({"id": "c1", "object": "chat.completion", "model": req["model"], "choices": [
                    {"index": 0, "message": {"role": "assistant", "content": CLOUD_TEXT}, "finish_reason": "stop"}],
                    "usage": {"prompt_tokens": 5, "completion_tokens": 6, "total_tokens": 11}}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        if tls_context:
            self.httpd.socket = tls_context.wrap_socket(self.httpd.socket, server_side=True)
        self.port = self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def all_bytes(self):
        return b"".join(self.received)

    def stop(self):
        self.httpd.shutdown()
        self.httpd.server_close()


class HostileCloud:
    """A cloud tier that reads the request, then answers with `reply` bytes
    (then, with `endless`, keeps sending header lines) and closes."""

    def __init__(self, reply, endless=False):
        import socket
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]
        self.reply, self.endless, self.running = reply, endless, True
        threading.Thread(target=self.serve, daemon=True).start()

    def serve(self):
        while self.running:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                conn.settimeout(5)
                try:
                    data = b""
                    while b"\r\n\r\n" not in data:
                        data += conn.recv(65536)
                    conn.sendall(self.reply)
                    while self.endless:
                        conn.sendall(b"X-Filler: " + b"a" * 1000 + b"\r\n")
                except OSError:
                    pass

    def stop(self):
        self.running = False
        self.sock.close()


def chat(port, body, headers=None, stream=False):
    """(status, headers, body bytes) of a Chat Completions request."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    c.request("POST", "/v1/chat/completions", json.dumps(body).encode(),
              {"Content-Type": "application/json", **(headers or {})})
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, {k.lower(): v for k, v in r.getheaders()}, data


def user(text, **extra):
    return {"messages": [{"role": "user", "content": text}], "max_tokens": 3, "temperature": 0, **extra}


# Sensitive values each carry a marker, so a leak anywhere in the bytes is found.
AWS = "AKIAQ7MARKERAWS12345"
ANTHROPIC = "sk-ant-api03-MARKERsplitKEYabcdefghijklmnop"
PEM = "-----BEGIN RSA PRIVATE KEY-----\nMIIEMARKERPEMpAIBAAKCAQEA\n-----END RSA PRIVATE KEY-----"
FILE_PASSAGE = ("MARKERFILE the quarterly numbers for the acquisition are confidential and must not leave "
                "the building under any circumstances whatsoever")


def local_corpus():
    """(name, request body, headers): each must stay on the machine."""
    half = len(ANTHROPIC) // 2
    return [
        ("declares a file tool", user("MARKER01 list my files", tools=[FILE_TOOL, WEB_TOOL]), None),
        ("aws key in a user turn", user(f"MARKER02 my key is {AWS}", tools=[WEB_TOOL]), None),
        ("key split across messages", {
            "messages": [{"role": "user", "content": "MARKER03 part one: " + ANTHROPIC[:half]},
                         {"role": "assistant", "content": "ok"},
                         {"role": "user", "content": ANTHROPIC[half:] + " search the web for it"}],
            "tools": [WEB_TOOL], "max_tokens": 3}, None),
        ("base64-encoded private key", user("MARKER04 decode " + base64.b64encode(PEM.encode()).decode(),
                                            tools=[WEB_TOOL]), None),
        ("hex-encoded token", user("MARKER05 " + ("ghp_" + "MARKERhex" + "a" * 30).encode().hex(),
                                   tools=[WEB_TOOL]), None),
        ("file contents pasted", user("MARKER06 what does this do?\n```python\nimport os\n"
                                      "print(os.environ)\n```", tools=[WEB_TOOL]), None),
        ("file path", user("MARKER07 summarise /home/alice/notes/plan.txt", tools=[WEB_TOOL]), None),
        ("tool result nested in a list", {
            "messages": [{"role": "user", "content": "MARKER08 read it"},
                         {"role": "assistant", "content": None, "tool_calls": [
                             {"id": "call_9", "type": "function",
                              "function": {"name": "read_file", "arguments": "{\"path\": \"a.txt\"}"}}]},
                         {"role": "tool", "tool_call_id": "call_9",
                          "content": [{"type": "text", "text": FILE_PASSAGE}]},
                         {"role": "user", "content": "now search the web"}],
            "tools": [WEB_TOOL], "max_tokens": 3}, None),
        ("history quotes an earlier file read", user(
            "MARKER09 find news about this: " + FILE_PASSAGE[len("MARKERFILE "):], tools=[WEB_TOOL]), None),
        ("connection string", user("MARKER10 postgres://admin:hunter2pass@db.internal:5432/prod", tools=[WEB_TOOL]),
         None),
        ("jwt", user("MARKER11 eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJNQVJLRVIifQ.c2lnbmF0dXJlMTIzNDU2", tools=[WEB_TOOL]),
         None),
        (".env secret", user("MARKER12\nDATABASE_PASSWORD=correcthorse99\n", tools=[WEB_TOOL]), None),
        ("unclassified", user("MARKER13 what is two plus two?"), None),
        ("asks to stay local", user("MARKER14 news please", tools=[WEB_TOOL], lily_routing={"route": "local"}), None),
        ("header asks to stay local", user("MARKER15 news please", tools=[WEB_TOOL]), {"x-lily-route": "local"}),
    ]


def make_tls(tmp):
    """A test CA and a certificate for localhost signed by it."""
    def run(*args):
        subprocess.run(["openssl", *args], check=True, capture_output=True, cwd=tmp)
    run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem", "-days", "2",
        "-subj", "/CN=Lily Test CA")
    run("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "srv.key", "-out", "srv.csr", "-subj", "/CN=localhost")
    with open(os.path.join(tmp, "ext.cnf"), "w") as f:
        f.write("subjectAltName=DNS:localhost\n")
    run("x509", "-req", "-in", "srv.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial", "-out", "srv.pem",
        "-days", "2", "-extfile", "ext.cnf")
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(os.path.join(tmp, "srv.pem"), os.path.join(tmp, "srv.key"))
    return os.path.join(tmp, "ca.pem"), ctx


def deployment(tmp, name, base_url, onCloudFailure="local", **cloud_extra):
    cfg = {"engine": "lily-cpu", "model": "Qwen3.6-35B-A3B",
           "hybridRouting": {"routeLocal": ["file_system", "user_credentials", "source_code"],
                             "routeCloud": ["web_search", "citation_index"],
                             "cloud": {"baseUrl": base_url, "model": "big-model", "apiKeyEnv": "LILY_TEST_CLOUD_KEY",
                                       **cloud_extra},
                             "onCloudFailure": onCloudFailure,
                             "cloudTimeoutSeconds": 20}}
    path = os.path.join(tmp, name)
    with open(path, "w") as f:
        json.dump(cfg, f)
    return path


def audit(path):
    with open(path) as f:
        return [json.loads(line) for line in f]


class Routing(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp()
        os.environ["LILY_TEST_CLOUD_KEY"] = "cloud-key-MARKERKEY"

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def serve(self, cfg, log):
        srv = Server("--deployment-config", cfg, "--audit-log", log, "--no-prefix-cache")
        self.addCleanup(srv.stop)
        return srv

    def check_no_leak(self, cloud):
        sent = cloud.all_bytes()
        for marker in [b"MARKER%02d" % i for i in range(1, 16)] + [b"MARKERFILE", b"MARKERAWS", b"MARKERPEM",
                                                                     b"MARKERsplit", b"MARKERhex", b"hunter2"]:
            self.assertNotIn(marker, sent)

    def run_corpus(self, srv, cloud, log):
        for name, body, headers in local_corpus():
            with self.subTest(name):
                status, h, data = chat(srv.port, body, headers)
                self.assertEqual(status, 200, data)
                self.assertEqual(h.get("x-lily-route"), "local", name)
                self.assertEqual(json.loads(data)["lily_route"], "local")
        self.assertEqual(cloud.received, [], "a local request reached the cloud tier")
        # Cloud-eligible: only web tools and nothing sensitive.
        status, h, data = chat(srv.port, user("What happened in the news today?", tools=[WEB_TOOL]))
        self.assertEqual((status, h.get("x-lily-route")), (200, "cloud"), data)
        answer = json.loads(data)
        self.assertEqual(answer["choices"][0]["message"]["content"], CLOUD_TEXT)
        self.assertEqual(answer["lily_route"], "cloud")
        self.assertEqual(answer["model"], "big-model")
        status, h, data = chat(srv.port, user("Any news on the web?", tools=[WEB_TOOL], stream=True))
        self.assertEqual((status, h.get("x-lily-route")), (200, "cloud"))
        self.assertEqual(data, SSE_BODY, "the streamed answer did not arrive intact")
        self.assertEqual(len(cloud.received), 2)
        first = cloud.received[0]
        self.assertIn(b"Authorization: Bearer cloud-key-MARKERKEY", first)
        self.assertIn(b'"model":"big-model"', first)
        self.check_no_leak(cloud)
        # The audit log: a decision per request, and the bytes of every call.
        lines = audit(log)
        decisions = [l for l in lines if l["event"] == "decision"]
        egress = [l for l in lines if l["event"] == "egress"]
        self.assertEqual(len(decisions), len(local_corpus()) + 2)
        self.assertEqual(sum(l["bytes_sent"] for l in egress), len(cloud.all_bytes()))
        self.assertEqual([l["outcome"] for l in egress], ["relayed", "relayed"])
        with open(log) as f:
            text = f.read()
        self.assertNotIn("MARKERKEY", text, "the API key reached the audit log")
        self.assertNotIn(AWS, text)
        self.assertNotIn(ANTHROPIC[:12], text)
        kinds = {f["kind"] for d in decisions for f in d["findings"]}
        for kind in ["declares tool read_file", "aws_access_key_id", "anthropic_api_key", "private_key", "github_token",
                     "code_block", "unix_path", "result of tool read_file", "quotes an earlier file_system tool result",
                     "connection_string", "jwt", "env_secret"]:
            self.assertIn(kind, kinds)
        metrics = srv.get("/metrics")[1].decode()
        self.assertIn("lily_route_cloud_total 2", metrics)
        self.assertIn("lily_egress_bytes_sent_total %d" % len(cloud.all_bytes()), metrics)
        return decisions

    def test_plain_http_cloud_tier(self):
        cloud = FakeCloud()
        self.addCleanup(cloud.stop)
        log = os.path.join(self.tmp, "plain.jsonl")
        srv = self.serve(deployment(self.tmp, "plain.json", f"http://127.0.0.1:{cloud.port}/v1"), log)
        decisions = self.run_corpus(srv, cloud, log)
        # lily audit explains a decision and sums the egress.
        out = subprocess.run([LILY, "audit", "--log", log], capture_output=True, text=True, check=True).stdout
        self.assertIn(f"http://127.0.0.1:{cloud.port}/v1: 2 calls (0 failed)", out)
        one = decisions[1]["request"]
        out = subprocess.run([LILY, "audit", "--log", log, "--request", one], capture_output=True, text=True,
                             check=True).stdout
        self.assertIn("route: local", out)
        self.assertIn("aws_access_key_id", out)

    def tls_tier(self, name, trusted):
        """A fake cloud tier over TLS, and lily serve pointed at it (with the test CA or without)."""
        if not shutil.which("openssl"):
            self.skipTest("no openssl command to make a test CA")
        ca, ctx = make_tls(self.tmp)
        cloud = FakeCloud(tls_context=ctx)
        self.addCleanup(cloud.stop)
        log = os.path.join(self.tmp, name + ".jsonl")
        extra = {"caFile": ca} if trusted else {}
        srv = self.serve(deployment(self.tmp, name + ".json", f"https://localhost:{cloud.port}/v1", **extra), log)
        return srv, cloud, log

    def test_tls_cloud_tier_with_a_test_ca(self):
        self.run_corpus(*self.tls_tier("tls", trusted=True))

    def test_untrusted_certificate_never_sends_and_falls_back(self):
        srv, cloud, log = self.tls_tier("untrusted", trusted=False)
        status, h, data = chat(srv.port, user("Any news?", tools=[WEB_TOOL]))
        self.assertEqual((status, h.get("x-lily-route")), (200, "local"), data)
        self.assertEqual(cloud.received, [])
        egress = [l for l in audit(log) if l["event"] == "egress"]
        self.assertEqual(len(egress), 1)
        self.assertIn("certificate", egress[0]["error"])
        self.assertEqual(egress[0]["bytes_sent"], 0)

    def test_cloud_failure_falls_back_or_errors_as_configured(self):
        cloud = FakeCloud(fail=True)
        self.addCleanup(cloud.stop)
        log = os.path.join(self.tmp, "fail.jsonl")
        srv = self.serve(deployment(self.tmp, "fail.json", f"http://127.0.0.1:{cloud.port}/v1"), log)
        status, h, data = chat(srv.port, user("Any news?", tools=[WEB_TOOL]))
        self.assertEqual((status, h.get("x-lily-route")), (200, "local"), data)
        strict = deployment(self.tmp, "strict.json", f"http://127.0.0.1:{cloud.port}/v1", onCloudFailure="error")
        srv2 = self.serve(strict, os.path.join(self.tmp, "strict.jsonl"))
        status, _, data = chat(srv2.port, user("Any news?", tools=[WEB_TOOL]))
        self.assertEqual(status, 502, data)
        self.assertIn(b"overloaded", data)

    def test_a_hostile_cloud_answer_is_a_failure_not_a_crash(self):
        cases = [("not http", HostileCloud(b"garbage\r\n\r\n")),
                 ("endless head", HostileCloud(b"HTTP/1.1 200 OK\r\n", endless=True)),
                 ("broken chunks", HostileCloud(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n")),
                 ("cut short", HostileCloud(b"HTTP/1.1 200 OK\r\nContent-Length: 500\r\n\r\n{\"id\"")),
                 ("not json", HostileCloud(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello"))]
        for name, cloud in cases:
            with self.subTest(name):
                self.addCleanup(cloud.stop)
                log = os.path.join(self.tmp, "hostile.jsonl")
                srv = self.serve(deployment(self.tmp, "hostile.json", f"http://127.0.0.1:{cloud.port}/v1"), log)
                status, h, data = chat(srv.port, user("Any news?", tools=[WEB_TOOL]))
                if name == "not json":
                    self.assertEqual(status, 502, data)
                else:
                    self.assertEqual((status, h.get("x-lily-route")), (200, "local"), data)
                self.assertEqual(srv.get("/health")[0], 200)
                egress = [l for l in audit(log) if l["event"] == "egress"]
                self.assertTrue(egress[-1]["error"] or name == "not json", egress[-1])

    def test_bad_routing_field_is_400_and_nothing_leaves(self):
        cloud = FakeCloud()
        self.addCleanup(cloud.stop)
        srv = self.serve(deployment(self.tmp, "field.json", f"http://127.0.0.1:{cloud.port}/v1"),
                         os.path.join(self.tmp, "field.jsonl"))
        status, _, data = chat(srv.port, user("news", tools=[WEB_TOOL], lily_routing={"route": "cloud"}))
        self.assertEqual(status, 400, data)
        self.assertIn(b"stricter", data)
        self.assertEqual(cloud.received, [])


if __name__ == "__main__":
    unittest.main(verbosity=2)
