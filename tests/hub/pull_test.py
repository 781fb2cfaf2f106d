"""`lily pull` end to end against a fake Hugging Face hub on loopback.

The fake speaks the part of the hub's HTTP API a download uses: the file list
of a revision (`/api/models/ORG/NAME/revision/REV?blobs=true`, with sizes,
git blob ids and LFS sha256s) and `resolve` URLs, which redirect LFS files to
a "CDN" on another host name and serve the rest themselves, with ETags and
X-Repo-Commit. It can cut, stall or corrupt a transfer, list a file it does
not have, ask for a token, or list a hostile path. Each case checks what is
left in the cache: the huggingface_hub layout (blobs, refs, snapshots of
relative symlinks), and never a corrupt or partial file in a snapshot."""
import hashlib
import json
import os
import pty
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LILY = os.environ.get("LILY_BINARY", "build/bin/lily")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TINY = os.environ.get("LILY_MODEL_DIR", os.path.join(ROOT, "models", "lily-tiny"))
GGUF_DIR = os.path.join(ROOT, "tests", "data", "models")
LFS_SUFFIXES = (".safetensors", ".gguf", "tokenizer.json")


def git_blob_sha1(data):
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


class Repo:
    def __init__(self, files, token=None, extra_listed=(), hostile_names=()):
        self.files = files  # path -> bytes
        self.commit = hashlib.sha1(json.dumps(sorted(files)).encode() + os.urandom(8)).hexdigest()
        self.token = token
        self.extra_listed = list(extra_listed)  # listed, but resolve answers 404
        self.hostile_names = list(hostile_names)

    def is_lfs(self, path):
        return path.endswith(LFS_SUFFIXES)

    def sibling(self, path, data):
        s = {"rfilename": path, "blobId": git_blob_sha1(data), "size": len(data)}
        if self.is_lfs(path):
            s["lfs"] = {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data), "pointerSize": 134}
        return s


class Hub:
    def __init__(self):
        self.repos = {}
        self.log = []  # (host, path, headers) of every request
        self.faults = {}  # file path -> list of per-request faults, taken in order
        self.stall = threading.Event()
        hub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_GET(self):
                hub.log.append((self.headers.get("Host", ""), self.path, dict(self.headers)))
                try:
                    hub.answer(self)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.endpoint = "http://127.0.0.1:%d" % self.port
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.stall.set()
        self.server.shutdown()

    def requests_for(self, name):
        return [(h, p, hd) for h, p, hd in self.log if "/resolve/" in p and p.endswith("/" + name) or
                ("/cdn/" in p and "file=" + urllib.parse.quote(name, safe="") in p)]

    @staticmethod
    def send(h, status, body=b"", headers=()):
        h.send_response(status)
        for k, v in headers:
            h.send_header(k, v)
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        h.wfile.write(body)

    def authorized(self, h, repo):
        if repo.token is None:
            return True
        got = h.headers.get("Authorization")
        if got is None:
            self.send(h, 401, b'{"error":"Access to this repo is restricted"}',
                      [("X-Error-Code", "GatedRepo"), ("X-Error-Message", "Access to this repo is restricted.")])
            return False
        if got != "Bearer " + repo.token:
            self.send(h, 401, b'{"error":"Invalid credentials"}', [("X-Error-Message", "Invalid credentials in Authorization header")])
            return False
        return True

    def answer(self, h):
        url = urllib.parse.urlsplit(h.path)
        parts = url.path.split("/")
        if url.path.startswith("/api/models/"):
            repo_id, rev = "/".join(parts[3:5]), urllib.parse.unquote(parts[6])
            repo = self.repos.get(repo_id)
            if repo is None:
                return self.send(h, 401, b'{"error":"Repository not found"}')
            if not self.authorized(h, repo):
                return
            if rev not in ("main", repo.commit):
                return self.send(h, 404, b'{"error":"Invalid rev id"}', [("X-Error-Message", "Invalid rev id: " + rev)])
            siblings = [repo.sibling(p, d) for p, d in sorted(repo.files.items())]
            siblings += [repo.sibling(p, b"gone") for p in repo.extra_listed]
            siblings += [{"rfilename": p, "blobId": "0" * 40, "size": 4} for p in repo.hostile_names]
            body = json.dumps({"id": repo_id, "sha": repo.commit, "siblings": siblings}).encode()
            return self.send(h, 200, body, [("Content-Type", "application/json")])
        if url.path.startswith("/cdn/"):
            if h.headers.get("Authorization"):
                return self.send(h, 400, b"a CDN must not be sent the hub token")
            q = urllib.parse.parse_qs(url.query)
            repo, name = self.repos[q["repo"][0]], q["file"][0]
            return self.serve_bytes(h, name, repo.files[name], [])
        if len(parts) >= 6 and parts[3] == "resolve":
            repo_id = "/".join(parts[1:3])
            repo = self.repos.get(repo_id)
            if repo is None:
                return self.send(h, 404, b"no repo")
            if not self.authorized(h, repo):
                return
            name = urllib.parse.unquote("/".join(parts[5:]))
            if name not in repo.files:
                return self.send(h, 404, b"Entry not found", [("X-Error-Code", "EntryNotFound")])
            data = repo.files[name]
            common = [("X-Repo-Commit", repo.commit)]
            if repo.is_lfs(name):
                sha = hashlib.sha256(data).hexdigest()
                location = "http://localhost:%d/cdn/%s?repo=%s&file=%s" % (
                    self.port, sha, urllib.parse.quote(repo_id, safe=""), urllib.parse.quote(name, safe=""))
                return self.send(h, 302, b"", common + [("Location", location), ("X-Linked-Etag", '"%s"' % sha),
                                                         ("X-Linked-Size", str(len(data))), ("ETag", '"%s"' % git_blob_sha1(data))])
            return self.serve_bytes(h, name, data, common + [("ETag", '"%s"' % git_blob_sha1(data))])
        self.send(h, 404, b"not found")

    def serve_bytes(self, h, name, data, headers):
        fault = self.faults[name].pop(0) if self.faults.get(name) else {}
        if fault.get("corrupt"):
            data = data[:100] + bytes([data[100] ^ 1]) + data[101:]
        start = 0
        rng = h.headers.get("Range")
        if rng and not fault.get("ignore_range"):
            m = re.fullmatch(r"bytes=(\d+)-", rng)
            start = int(m.group(1))
            if start >= len(data):
                return self.send(h, 416, b"", [("Content-Range", "bytes */%d" % len(data))])
        h.send_response(206 if start else 200)
        for k, v in headers:
            h.send_header(k, v)
        if start:
            h.send_header("Content-Range", "bytes %d-%d/%d" % (start, len(data) - 1, len(data)))
        h.send_header("Content-Length", str(len(data) - start))
        h.end_headers()
        end = fault.get("cut_at", fault.get("stall_at", len(data)))
        h.wfile.write(data[start:max(start, end)])
        h.wfile.flush()
        if "stall_at" in fault:
            self.stall.wait(fault.get("stall_s", 60))
        if "cut_at" in fault or "stall_at" in fault:
            h.close_connection = True
            h.connection.shutdown(2)
            return
        h.wfile.write(data[end:]) if end < len(data) else None


def tiny_files():
    files = {}
    for name in sorted(os.listdir(TINY)):
        with open(os.path.join(TINY, name), "rb") as f:
            files[name] = f.read()
    files["docs/nested/notes.md"] = b"# Notes\nA file in a folder, linked with one ../ per level.\n"
    return files


class PullTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.hub = Hub()
        cls.tiny = Repo(tiny_files())
        cls.hub.repos["lily-test/tiny"] = cls.tiny

    @classmethod
    def tearDownClass(cls):
        cls.hub.close()

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="lily-pull-")
        self.cache = os.path.join(self.tmp, "hub")
        self.hub.log.clear()
        self.hub.faults.clear()
        self.hub.stall.clear()

    def tearDown(self):
        self.hub.stall.set()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def env(self, token=None):
        env = {k: v for k, v in os.environ.items() if not k.startswith("HF_")}
        env.update(HF_ENDPOINT=self.hub.endpoint, HF_HUB_CACHE=self.cache, HOME=self.tmp)
        if token is not None:
            env["HF_TOKEN"] = token
        return env

    def lily(self, *args, token=None, timeout=120):
        return subprocess.run([LILY, *args], env=self.env(token), capture_output=True, text=True, timeout=timeout)

    def pull(self, repo, *args, ok=True, **kw):
        r = self.lily("pull", repo, *args, **kw)
        if ok:
            self.assertEqual(r.returncode, 0, r.stderr)
        else:
            self.assertNotEqual(r.returncode, 0, r.stderr)
        return r

    def repo_dir(self, repo_id):
        return os.path.join(self.cache, "models--" + repo_id.replace("/", "--"))

    def assert_snapshot(self, repo_id, repo, names):
        """The huggingface_hub layout: refs/main holds the commit; each file is a
        relative symlink from snapshots/<commit>/ to a blob named by its hash
        that holds exactly the hub's bytes."""
        d = self.repo_dir(repo_id)
        with open(os.path.join(d, "refs", "main")) as f:
            self.assertEqual(f.read(), repo.commit)
        snap = os.path.join(d, "snapshots", repo.commit)
        found = sorted(os.path.relpath(os.path.join(r, f), snap) for r, _, fs in os.walk(snap) for f in fs)
        self.assertEqual(found, sorted(names))
        for name in names:
            link = os.path.join(snap, name)
            self.assertTrue(os.path.islink(link), name)
            data = repo.files[name]
            blob = hashlib.sha256(data).hexdigest() if repo.is_lfs(name) else git_blob_sha1(data)
            self.assertEqual(os.readlink(link), "../" * (2 + name.count("/")) + "blobs/" + blob)
            with open(link, "rb") as f:
                self.assertEqual(f.read(), data, name)
        self.assertEqual([f for f in os.listdir(os.path.join(d, "blobs")) if f.endswith(".incomplete")], [])

    def test_whole_repository_then_offline_use(self):
        r = self.pull("lily-test/tiny", "--jobs", "3")
        self.assert_snapshot("lily-test/tiny", self.tiny, list(self.tiny.files))
        self.assertNotIn("\x1b[", r.stderr, "no escape codes when stderr is not a terminal")
        self.assertEqual(r.stdout.strip(), os.path.join(self.repo_dir("lily-test/tiny"), "snapshots", self.tiny.commit))
        # The CDN was never sent anything but a signed URL.
        cdn = [hd for host, p, hd in self.hub.log if p.startswith("/cdn/")]
        self.assertEqual(len(cdn), sum(self.tiny.is_lfs(n) for n in self.tiny.files))
        # Found offline by repo id, and runs.
        info = self.lily("info", "--model", "lily-test/tiny")
        self.assertEqual(info.returncode, 0, info.stderr)
        self.assertIn("snapshots/" + self.tiny.commit, info.stdout)
        run = self.lily("run", "lily-test/tiny", "hello", "--max-tokens", "4")
        self.assertEqual(run.returncode, 0, run.stderr)
        # A second pull finds everything and fetches nothing.
        self.hub.log.clear()
        again = self.pull("lily-test/tiny")
        self.assertEqual([p for _, p, _ in self.hub.log if "/resolve/" in p or "/cdn/" in p], [])
        self.assertIn("(%d already there)" % len(self.tiny.files), again.stderr)

    def test_cut_and_stalled_transfers_resume_with_range(self):
        size = len(self.tiny.files["model.safetensors"])
        self.hub.faults["model.safetensors"] = [{"cut_at": 1 << 20}, {"stall_at": 3 << 20, "stall_s": 30}, {"cut_at": 5 << 20}]
        self.hub.faults["config.json"] = [{"cut_at": 200}]
        self.pull("lily-test/tiny", "--idle-timeout", "1")
        ranges = [hd.get("Range") for _, p, hd in self.hub.requests_for("model.safetensors") if p.startswith("/cdn/")]
        self.assertEqual(ranges, [None, "bytes=%d-" % (1 << 20), "bytes=%d-" % (3 << 20), "bytes=%d-" % (5 << 20)])
        self.assertGreater(size, 5 << 20)
        self.assertEqual([hd.get("Range") for _, _, hd in self.hub.requests_for("config.json")], [None, "bytes=200-"])
        self.assert_snapshot("lily-test/tiny", self.tiny, list(self.tiny.files))

    def test_a_killed_pull_resumes_where_it_stopped(self):
        self.hub.faults["model.safetensors"] = [{"stall_at": 2 << 20, "stall_s": 60}]
        sha = hashlib.sha256(self.tiny.files["model.safetensors"]).hexdigest()
        part = os.path.join(self.repo_dir("lily-test/tiny"), "blobs", sha + ".incomplete")
        p = subprocess.Popen([LILY, "pull", "lily-test/tiny"], env=self.env(), stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
        deadline = time.time() + 60
        while not (os.path.exists(part) and os.path.getsize(part) >= 2 << 20) and time.time() < deadline:
            time.sleep(0.05)
        p.send_signal(signal.SIGKILL)
        p.wait()
        self.assertEqual(os.path.getsize(part), 2 << 20)
        self.assertFalse(os.path.exists(os.path.join(self.repo_dir("lily-test/tiny"), "snapshots", self.tiny.commit,
                                                     "model.safetensors")))
        self.hub.stall.set()
        self.hub.log.clear()
        self.pull("lily-test/tiny")
        ranges = [hd.get("Range") for _, p, hd in self.hub.requests_for("model.safetensors") if p.startswith("/cdn/")]
        self.assertEqual(ranges, ["bytes=%d-" % (2 << 20)])
        self.assert_snapshot("lily-test/tiny", self.tiny, list(self.tiny.files))

    def test_a_server_that_ignores_the_range_is_read_from_the_start(self):
        self.hub.faults["model.safetensors"] = [{"cut_at": 1 << 20}, {"ignore_range": True}]
        self.pull("lily-test/tiny")
        self.assert_snapshot("lily-test/tiny", self.tiny, list(self.tiny.files))

    def test_a_corrupt_file_is_removed_and_never_linked(self):
        self.hub.faults["tokenizer.json"] = [{"corrupt": True}]
        self.hub.faults["config.json"] = [{"corrupt": True}]
        r = self.pull("lily-test/tiny", ok=False)
        self.assertRegex(r.stderr, r"tokenizer\.json: its sha256 is [0-9a-f]{64} but the hub lists [0-9a-f]{64}: "
                                   r"the download is corrupt and was removed")
        self.assertRegex(r.stderr, r"config\.json: its git blob sha1 is [0-9a-f]{40} but the hub lists")
        self.assertIn("2 of %d files of lily-test/tiny failed" % len(self.tiny.files), r.stderr)
        d = self.repo_dir("lily-test/tiny")
        snap = os.path.join(d, "snapshots", self.tiny.commit)
        self.assertFalse(os.path.lexists(os.path.join(snap, "tokenizer.json")))
        self.assertFalse(os.path.lexists(os.path.join(snap, "config.json")))
        self.assertTrue(os.path.exists(os.path.join(snap, "model.safetensors")))
        self.assertEqual([f for f in os.listdir(os.path.join(d, "blobs")) if "." in f], [])
        # The next pull fetches only what failed.
        self.hub.log.clear()
        self.pull("lily-test/tiny")
        fetched = sorted({p.rsplit("/", 1)[-1] for _, p, _ in self.hub.log if "/resolve/" in p})
        self.assertEqual(fetched, ["config.json", "tokenizer.json"])
        self.assert_snapshot("lily-test/tiny", self.tiny, list(self.tiny.files))

    def test_a_listed_file_the_hub_does_not_have(self):
        self.hub.repos["lily-test/holes"] = repo = Repo({"config.json": b"{}"}, extra_listed=["weights.bin"])
        r = self.pull("lily-test/holes", ok=False)
        self.assertIn("weights.bin: the hub lists it but has no such file (404)", r.stderr)
        snap = os.path.join(self.repo_dir("lily-test/holes"), "snapshots", repo.commit)
        self.assertEqual(os.listdir(snap), ["config.json"])

    def test_a_gated_repository_needs_hf_token(self):
        self.hub.repos["lily-test/gated"] = repo = Repo(tiny_files(), token="hf_secret")
        r = self.pull("lily-test/gated", ok=False)
        self.assertIn("set HF_TOKEN to a token with access", r.stderr)
        r = self.pull("lily-test/gated", ok=False, token="hf_wrong")
        self.assertIn("the hub refused HF_TOKEN", r.stderr)
        self.assertIn("Invalid credentials", r.stderr)
        self.assertFalse(os.path.exists(os.path.join(self.repo_dir("lily-test/gated"), "snapshots")))
        self.hub.log.clear()
        self.pull("lily-test/gated", token="hf_secret")
        self.assert_snapshot("lily-test/gated", repo, list(repo.files))
        hub_calls = [hd for host, p, hd in self.hub.log if not p.startswith("/cdn/")]
        self.assertTrue(all(hd.get("Authorization") == "Bearer hf_secret" for hd in hub_calls))
        # The token is also read from the file `hf auth login` writes.
        os.makedirs(os.path.join(self.tmp, ".cache", "huggingface"))
        with open(os.path.join(self.tmp, ".cache", "huggingface", "token"), "w") as f:
            f.write("hf_secret\n")
        shutil.rmtree(self.cache)
        self.pull("lily-test/gated")

    def test_include_picks_files_and_gguf_repositories_are_found(self):
        self.pull("lily-test/tiny", "--include", "*.json")
        names = [n for n in self.tiny.files if n.endswith(".json")]
        self.assert_snapshot("lily-test/tiny", self.tiny, names)
        files = {}
        for name in ("tiny-a.gguf", "tiny-c.gguf"):
            with open(os.path.join(GGUF_DIR, name), "rb") as f:
                files[name] = f.read()
        self.hub.repos["lily-test/tiny-gguf"] = repo = Repo(files)
        self.pull("lily-test/tiny-gguf", "--include", "tiny-a*")
        self.assert_snapshot("lily-test/tiny-gguf", repo, ["tiny-a.gguf"])
        info = self.lily("info", "--model", "lily-test/tiny-gguf")
        self.assertEqual(info.returncode, 0, info.stderr)
        self.assertRegex(info.stdout, r"model: +\S+/snapshots/%s/tiny-a\.gguf" % repo.commit)
        self.pull("lily-test/tiny-gguf")
        info = self.lily("info", "--model", "lily-test/tiny-gguf")
        self.assertNotEqual(info.returncode, 0)
        self.assertIn("holds 2 GGUF models; name the file to use", info.stderr)
        r = self.pull("lily-test/tiny-gguf", "--include", "*Q4_K_M*", ok=False)
        self.assertIn("no file of lily-test/tiny-gguf matches --include", r.stderr)

    def test_hostile_and_wrong_input(self):
        self.hub.repos["lily-test/evil"] = Repo({"config.json": b"{}"}, hostile_names=["../../../escape.txt"])
        r = self.pull("lily-test/evil", ok=False)
        self.assertIn("unsafe path '../../../escape.txt'", r.stderr)
        self.assertEqual([f for _, _, fs in os.walk(self.tmp) for f in fs if "escape" in f], [])
        r = self.pull("lily-test/tiny", "--revision", "v9", ok=False)
        self.assertIn("no revision 'v9' of lily-test/tiny", r.stderr)
        r = self.pull("../etc/passwd", ok=False)
        self.assertIn("is not a Hugging Face repo id", r.stderr)
        r = self.pull("nobody/nothing", ok=False)
        self.assertIn("HF_TOKEN", r.stderr)
        # Running never downloads: an absent model names `lily pull`.
        r = self.lily("run", "nobody/nothing", "hello")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("lily pull nobody/nothing", r.stderr)
        self.assertEqual([p for _, p, _ in self.hub.log if "nobody" in p and "/api/" not in p], [])
        # A hub that is not there.
        env = self.env()
        env["HF_ENDPOINT"] = "http://127.0.0.1:9"
        r = subprocess.run([LILY, "pull", "lily-test/tiny"], env=env, capture_output=True, text=True, timeout=60)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("cannot connect to 127.0.0.1:9", r.stderr)

    def test_progress_on_a_terminal(self):
        master, slave = pty.openpty()
        p = subprocess.Popen([LILY, "pull", "lily-test/tiny", "--jobs", "2"], env=self.env(), stdout=subprocess.DEVNULL,
                             stderr=slave)
        os.close(slave)
        out = b""
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:
                break
            if not chunk:
                break
            out += chunk
        p.wait()
        os.close(master)
        self.assertEqual(p.returncode, 0)
        text = out.decode(errors="replace")
        self.assertIn("\x1b[", text)
        self.assertRegex(text, r"total +\[#+ *\] +100%  \d+\.\d MiB / \d+\.\d MiB  [\d.]+ [KMG]?i?B/s")
        self.assertRegex(text, r"model\.safetensors: done \(\d+\.\d MiB")


if __name__ == "__main__":
    unittest.main(verbosity=2)
