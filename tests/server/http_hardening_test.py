"""lily serve against hostile and careless clients, on loopback: deep JSON,
broken framing, pipelining, HTTP/1.0, slow clients, connection caps, key
checks and memory held flat across requests that are refused."""
import json
import os
import socket
import threading
import time
import unittest

from lily_server import Server, read_all, read_response

# A sanitizer's allocator holds freed memory back on purpose: RSS says nothing
# there, and its leak checker says more.
SANITIZED = bool(os.environ.get("LILY_SANITIZE"))

CHAT = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2, "temperature": 0}


class Hardening(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.srv = Server("--parallel", "2", "--queue", "2", "--head-timeout", "2", "--body-timeout", "3",
                         "--max-connections-per-client", "64", "--max-body", "4000000", "--no-prefix-cache")

    @classmethod
    def tearDownClass(cls):
        cls.srv.stop()

    def assertHealthy(self, within=1.0):
        t0 = time.time()
        self.assertEqual(self.srv.get("/health", timeout=within + 1)[0], 200)
        self.assertLess(time.time() - t0, within)

    def test_deep_json_is_refused_and_the_server_lives(self):
        d = 40000
        body = '{"messages":[{"role":"user","content":"hi"}],"chat_template_kwargs":{"x":' + "[" * d + "]" * d + "}}"
        status, text = self.srv.post("/v1/chat/completions", body.encode())
        self.assertEqual(status, 400)
        self.assertIn(b"nested deeper", text)
        d = 100000
        params = '{"a":' * d + "1" + "}" * d
        body = ('{"messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":'
                '{"name":"f","parameters":' + params + "}}]}")
        self.assertEqual(self.srv.post("/v1/chat/completions", body.encode())[0], 400)
        self.assertHealthy()

    def test_negative_content_length_is_400_at_once_and_closes(self):
        s = self.srv.connect()
        self.addCleanup(s.close)
        t0 = time.time()
        s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: -5\r\n\r\n")
        out = read_all(s)
        self.assertLess(time.time() - t0, 1.5)
        self.assertTrue(out.startswith(b"HTTP/1.1 400"), out)
        self.assertIn(b"Content-Length", out)

    def test_garbage_gets_400_and_the_connection_closes(self):
        s = self.srv.connect()
        self.addCleanup(s.close)
        s.sendall(b"garbage\r\n\r\n")
        out = read_all(s)  # returns only once the server closes
        self.assertTrue(out.startswith(b"HTTP/1.1 400"), out)

    def test_chunked_request_bodies_get_411(self):
        s = self.srv.connect()
        self.addCleanup(s.close)
        s.sendall(b"POST /tokenize HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n")
        self.assertTrue(read_all(s).startswith(b"HTTP/1.1 411"))

    def test_a_body_over_the_limit_gets_413_at_once(self):
        s = self.srv.connect()
        self.addCleanup(s.close)
        t0 = time.time()
        s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 999999999\r\n\r\n")
        self.assertTrue(read_all(s).startswith(b"HTTP/1.1 413"))
        self.assertLess(time.time() - t0, 1.5)

    def test_pipelined_requests_are_all_answered_in_order(self):
        s = self.srv.connect()
        self.addCleanup(s.close)
        body = json.dumps({"content": "hello"}).encode()
        tok = b"POST /tokenize HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)
        s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n" + tok + b"GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n")
        rest = b""
        answers = []
        for _ in range(3):
            status, _, body, rest = read_response(s, rest)
            answers.append((status, json.loads(body)))
        self.assertEqual([a[0] for a in answers], [200, 200, 200])
        self.assertEqual(answers[0][1], {"status": "ok"})
        self.assertIn("tokens", answers[1][1])
        self.assertEqual(answers[2][1]["object"], "list")

    def test_an_http10_stream_is_not_chunked_and_ends_with_the_connection(self):
        s = self.srv.connect()
        self.addCleanup(s.close)
        body = json.dumps({**CHAT, "stream": True}).encode()
        s.sendall(b"POST /v1/chat/completions HTTP/1.0\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
                  % (len(body), body))
        out = read_all(s)
        head, _, payload = out.partition(b"\r\n\r\n")
        self.assertIn(b"200", head.split(b"\r\n")[0])
        self.assertNotIn(b"chunked", head.lower())
        self.assertIn(b"connection: close", head.lower())
        self.assertTrue(payload.rstrip().endswith(b"data: [DONE]"), payload)

    def test_models_by_id(self):
        status, body = self.srv.get("/v1/models")
        name = json.loads(body)["data"][0]["id"]
        status, body = self.srv.get("/v1/models/" + name)
        self.assertEqual(status, 200)
        self.assertEqual(json.loads(body)["id"], name)
        self.assertEqual(self.srv.get("/v1/models/nope")[0], 404)

    def test_slow_clients_never_starve_health_or_requests(self):
        # 40 connections each sending its head one byte at a time: more than
        # the --parallel 2 --queue 2 server has slots for.
        socks = [self.srv.connect() for _ in range(40)]
        head = b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n"
        stop = threading.Event()

        def dribble():
            for i in range(len(head) - 1):
                if stop.is_set():
                    return
                for s in socks:
                    try:
                        s.send(head[i:i + 1])
                    except OSError:
                        pass
                time.sleep(0.3)

        t = threading.Thread(target=dribble)
        t.start()
        try:
            for _ in range(5):
                self.assertHealthy(within=1.0)
                status, _ = self.srv.post("/v1/chat/completions", CHAT)
                self.assertEqual(status, 200)
                time.sleep(0.2)
            # the head deadline (2 s) ends each of them with 408, however slowly they send
            for s in socks:
                out = read_all(s)
                self.assertTrue(out.startswith(b"HTTP/1.1 408"), out)
        finally:
            stop.set()
            t.join()
            for s in socks:
                s.close()

    def test_idle_connections_are_closed_quietly(self):
        s = self.srv.connect()
        self.addCleanup(s.close)
        t0 = time.time()
        self.assertEqual(read_all(s), b"")
        self.assertLess(time.time() - t0, 4)

    def test_connections_per_client_are_capped(self):
        socks = [self.srv.connect() for _ in range(64)]
        try:
            time.sleep(0.3)
            extra = self.srv.connect()
            self.addCleanup(extra.close)
            self.assertTrue(read_all(extra).startswith(b"HTTP/1.1 429"))
        finally:
            for s in socks:
                s.close()
        time.sleep(0.3)
        self.assertHealthy()

    def assertMemoryFlat(self, body, status, warm, count, limit_mb):
        """RSS after `count` more requests, past `warm` of them, grows by less than `limit_mb`."""
        for _ in range(warm):
            self.assertEqual(self.srv.post("/v1/chat/completions", body)[0], status)
        before = self.srv.rss_mb()
        for _ in range(count):
            self.assertEqual(self.srv.post("/v1/chat/completions", body)[0], status)
        grown = self.srv.rss_mb() - before
        self.assertLess(grown, limit_mb, f"RSS grew {grown:.2f} MB over {count} requests answered {status}")

    @unittest.skipIf(SANITIZED, "RSS under a sanitizer's allocator")
    def test_refused_requests_do_not_hold_memory(self):
        big = {"messages": [{"role": "user", "content": "x" * 1_000_000}], "temperature": -1}
        self.assertMemoryFlat(big, 400, warm=10, count=100, limit_mb=30)

    @unittest.skipIf(SANITIZED, "RSS under a sanitizer's allocator")
    def test_answered_requests_do_not_hold_memory(self):
        self.assertMemoryFlat(CHAT, 200, warm=50, count=600, limit_mb=2)


class Exposure(unittest.TestCase):
    def test_listening_beyond_loopback_without_a_key_warns(self):
        srv = Server("--host", "0.0.0.0")
        try:
            self.assertIn("without --api-key", srv.log)
        finally:
            srv.stop()
        srv = Server("--host", "127.0.0.1")
        try:
            self.assertNotIn("without --api-key", srv.log)
        finally:
            srv.stop()


class ApiKey(unittest.TestCase):
    def test_bearer_scheme_in_any_case(self):
        srv = Server("--api-key", "sekret")
        try:
            self.assertEqual(srv.get("/v1/models", {"Authorization": "Bearer sekret"})[0], 200)
            self.assertEqual(srv.get("/v1/models", {"Authorization": "bearer sekret"})[0], 200)
            self.assertEqual(srv.get("/v1/models", {"Authorization": "BEARER sekret"})[0], 200)
            self.assertEqual(srv.get("/v1/models", {"Authorization": "Bearer wrong"})[0], 401)
            self.assertEqual(srv.get("/v1/models")[0], 401)
            self.assertEqual(srv.get("/health")[0], 200)
        finally:
            srv.stop()


if __name__ == "__main__":
    unittest.main(verbosity=2)
