"""LFS servers for the remote-header tests, on 127.0.0.1 with a port the OS picks.

    lfs_server.py giftless STORAGE [--auth]
        The real giftless (local storage, basic transfer: whole objects, Range ignored),
        wrapped to count the body bytes it sends. With --auth it demands a JWT (as a Bearer
        token, or as the password of user `_jwt`); the tokens are printed at startup.

    lfs_server.py range STORAGE [--fault NAME] [--other-origin URL] [--tls CERT KEY]
        A small purpose-built LFS server over the same storage layout (STORAGE/org/repo/OID):
        the batch API and object downloads that honor Range (206), and the faults a real
        server cannot be made to produce on demand (see FAULTS).

    lfs_server.py proxy
        An HTTP CONNECT proxy that tunnels to 127.0.0.1 whatever host it is asked for (so an
        LFS URL on a name that does not resolve is reached only through it) and records each
        CONNECT target.

All print one JSON line once they listen ({"port": ..., "tokens": {...}}), serve
GET /_stats (bytes of bodies sent, and every request's method, path, Range and headers),
and exit when their standard input closes (the test that started them has ended).
"""

import json
import os
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

STATS_LOCK = threading.Lock()
STATS = {"bytes_sent": 0, "requests": []}

FAULTS = {
    "none",
    "missing",  # batch: every object 404
    "flaky",  # first batch request and first download: 500 with Retry-After: 0
    "garbage",  # downloads: bytes that are no model
    "truncated",  # 206 whose body ends before its Content-Length
    "wrong-range",  # 206 with a Content-Range that is not the one asked for
    "416",  # downloads: 416 Range Not Satisfiable
    "expired",  # downloads: 403 "Request has expired"
    "huge-length",  # 200 with a Content-Length of a petabyte
    "stall",  # downloads: headers, then nothing
    "redirect",  # downloads: 302 to --other-origin
    "other-href",  # batch: hrefs on --other-origin
    "auth",  # batch: 401 unless Authorization is Bearer TOKEN or Basic with password TOKEN
    "auth-redirect",  # batch: as "auth", then 307 to --other-origin once authorized
    "deny",  # batch: 401 whatever the credentials
    "trickle",  # downloads: 206, then one byte of the body every TRICKLE_SECONDS
}

READ_TOKEN = "read-token-5b1e"
PACE_CHUNK = 64 * 1024
PACE_SECONDS = 0.002
HREF_TOKEN = "href-token-9c2d"
TRICKLE_SECONDS = 0.05


def record(handler, status):
    with STATS_LOCK:
        STATS["requests"].append(
            {
                "method": handler.command,
                "path": handler.path,
                "range": handler.headers.get("Range"),
                "headers": {k.lower(): v for k, v in handler.headers.items()},
                "status": status,
            }
        )


def count(n):
    with STATS_LOCK:
        STATS["bytes_sent"] += n


def stats_body():
    with STATS_LOCK:
        return json.dumps(STATS).encode()


def exit_when_stdin_closes():
    def watch():
        sys.stdin.buffer.read()
        os._exit(0)

    threading.Thread(target=watch, daemon=True).start()


def small_send_buffer(sock):
    # Counted bytes then approximate what reached the client: the kernel cannot buffer
    # megabytes of a whole-object answer the client never reads. (Not for benchmarks of
    # whole downloads, LFS_SERVER_BULK=1, where it would limit the throughput.)
    if not os.environ.get("LFS_SERVER_BULK"):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 32 * 1024)


def announce(port, tokens):
    print(json.dumps({"port": port, "tokens": tokens}), flush=True)


# ---------------------------------------------------------------- giftless


def run_giftless(storage, auth):
    from werkzeug.serving import WSGIRequestHandler, make_server

    from giftless.app import init_app

    secret = "test-secret-for-hs256-tokens-0123456789"
    config = {
        "LEGACY_ENDPOINTS": False,
        "TRANSFER_ADAPTERS": {
            "basic": {
                "options": {"storage_options": {"path": storage}},
            }
        },
        "PRE_AUTHORIZED_ACTION_PROVIDER": {
            "options": {"private_key": secret, "default_lifetime": 600}
        },
    }
    tokens = {}
    if auth:
        import jwt

        now = int(time.time())

        def token(scope):
            return jwt.encode(
                {"sub": "tester", "iat": now, "exp": now + 3600, "scopes": [scope]},
                secret,
                algorithm="HS256",
            )

        tokens = {"write": token("obj:org/*"), "read": token("obj:org/*:read")}
        config["AUTH_PROVIDERS"] = [
            {
                "factory": "giftless.auth.jwt:factory",
                "options": {"algorithm": "HS256", "private_key": secret},
            }
        ]
    else:
        config["AUTH_PROVIDERS"] = ["giftless.auth.allow_anon:read_write"]
    import warnings

    warnings.simplefilter("ignore")
    app = init_app(additional_config=config)
    inner = app.wsgi_app

    def counting(environ, start_response):
        if environ.get("PATH_INFO") == "/_stats":
            body = stats_body()
            start_response(
                "200 OK",
                [("Content-Type", "application/json"), ("Content-Length", str(len(body)))],
            )
            return [body]
        captured = {}

        def start(status, headers, exc_info=None):
            captured["status"] = int(status.split()[0])
            return start_response(status, headers, exc_info)

        class Fake:
            command = environ["REQUEST_METHOD"]
            path = environ.get("PATH_INFO", "")
            headers = {
                k[5:].replace("_", "-").title(): v
                for k, v in environ.items()
                if k.startswith("HTTP_")
            }

        result = inner(environ, start)
        record(Fake, captured.get("status"))

        def body():
            # Paced like a network link (about 32 MB/s): on loopback, with a receive window
            # of tens of MiB, the kernel would take a whole object before the client even
            # closes the connection, and the count would say nothing about the client.
            try:
                for chunk in result:
                    for start in range(0, len(chunk), PACE_CHUNK):
                        piece = chunk[start : start + PACE_CHUNK]
                        count(len(piece))
                        yield piece
                        time.sleep(PACE_SECONDS)
            finally:
                close = getattr(result, "close", None)
                if close:
                    close()

        return body()

    class Handler(WSGIRequestHandler):
        def setup(self):
            small_send_buffer(self.request)
            super().setup()

        def log_request(self, *args, **kwargs):
            pass

    server = make_server("127.0.0.1", 0, counting, threaded=True, request_handler=Handler)
    announce(server.server_port, tokens)
    server.serve_forever()


# ---------------------------------------------------------------- range server


class RangeHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    storage = "."
    fault = "none"
    other_origin = None
    origin = None
    state = {"batch_calls": 0, "object_calls": 0}

    def setup(self):
        super().setup()
        small_send_buffer(self.connection)

    def log_message(self, *args):
        pass

    def send_body(self, status, body, headers=(), content_type="application/json"):
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for k, v in headers:
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)
        count(len(body))
        record(self, status)

    def do_GET(self):
        if self.path == "/_stats":
            body = stats_body()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        self.download()

    def do_POST(self):
        length = int(self.headers.get("Content-Length", "0"))
        request = json.loads(self.rfile.read(length) or b"{}")
        if not self.path.endswith("/objects/batch"):
            return self.send_body(404, b'{"message":"no such endpoint"}')
        self.state["batch_calls"] += 1
        if self.fault in ("auth", "auth-redirect") and not self.authorized() or self.fault == "deny":
            return self.send_body(
                401,
                b'{"message":"credentials needed"}',
                [("LFS-Authenticate", 'Basic realm="test"')],
            )
        if self.fault == "auth-redirect" and self.other_origin:
            self.send_response(307)
            self.send_header("Location", f"{self.other_origin}{self.path}")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return record(self, 307)
        if self.fault == "flaky" and self.state["batch_calls"] == 1:
            return self.send_body(500, b'{"message":"try again"}', [("Retry-After", "0")])
        repo_prefix = self.path[: -len("/objects/batch")]
        repo_prefix = repo_prefix.removesuffix(".git/info/lfs").strip("/")
        base = self.other_origin if self.fault == "other-href" else self.origin
        objects = []
        for obj in request.get("objects", []):
            oid = obj["oid"]
            path = os.path.join(self.storage, repo_prefix, oid)
            if self.fault == "missing" or not os.path.isfile(path):
                objects.append(
                    {"oid": oid, "size": obj["size"], "error": {"code": 404, "message": "Object does not exist"}}
                )
                continue
            objects.append(
                {
                    "oid": oid,
                    "size": obj["size"],
                    "actions": {
                        "download": {
                            "href": f"{base}/objects/{repo_prefix}/{oid}",
                            "header": {"Authorization": f"Bearer {HREF_TOKEN}"},
                            "expires_in": 600,
                        }
                    },
                }
            )
        body = json.dumps({"transfer": "basic", "objects": objects, "hash_algo": "sha256"})
        self.send_body(200, body.encode(), content_type="application/vnd.git-lfs+json")

    def send_whole(self, path, size):
        """A whole object (a plain download, as `git lfs fetch` makes), streamed."""
        self.send_response(200)
        self.send_header("Content-Length", str(size))
        self.send_header("Content-Type", "application/octet-stream")
        self.end_headers()
        record(self, 200)
        with open(path, "rb") as f:
            while chunk := f.read(1 << 20):
                try:
                    self.wfile.write(chunk)
                except (BrokenPipeError, ConnectionResetError):
                    return
                count(len(chunk))

    def authorized(self):
        value = self.headers.get("Authorization", "")
        if value == f"Bearer {READ_TOKEN}":
            return True
        if value[:6].lower() == "basic ":  # the scheme is case-insensitive
            import base64

            user, _, password = base64.b64decode(value[6:]).decode().partition(":")
            return password == READ_TOKEN
        return False

    def download(self):
        prefix = "/objects/"
        if not self.path.startswith(prefix):
            return self.send_body(404, b'{"message":"not found"}')
        rel = self.path[len(prefix):]
        path = os.path.join(self.storage, rel)
        self.state["object_calls"] += 1
        fault = self.fault
        if fault == "redirect" and self.other_origin:
            self.send_response(302)
            self.send_header("Location", f"{self.other_origin}/objects/{rel}")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return record(self, 302)
        if fault == "flaky" and self.state["object_calls"] == 1:
            return self.send_body(503, b"busy", [("Retry-After", "0")], "text/plain")
        if fault == "expired":
            return self.send_body(403, b'{"message":"Request has expired"}')
        if fault == "416":
            return self.send_body(416, b"", [("Content-Range", "bytes */1")])
        if not os.path.isfile(path):
            return self.send_body(404, b'{"message":"Object does not exist"}')
        size = os.path.getsize(path)
        if fault == "huge-length":
            self.send_response(200)
            self.send_header("Content-Length", str(10**15))
            self.end_headers()
            record(self, 200)
            return
        start, end = 0, size - 1
        value = self.headers.get("Range")
        if not value and fault == "none":
            return self.send_whole(path, size)
        if value and value.startswith("bytes="):
            first, _, last = value[6:].partition("-")
            start = int(first)
            end = min(int(last), size - 1) if last else size - 1
        if fault == "stall":
            # A valid answer whose body never comes.
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{end}/{size}")
            self.send_header("Content-Length", str(end - start + 1))
            self.end_headers()
            record(self, 206)
            time.sleep(120)
            return
        with open(path, "rb") as f:
            f.seek(start)
            data = f.read(end - start + 1)
        if fault == "trickle":
            # Every byte comes well within any activity timeout; the whole never does.
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{end}/{size}")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            record(self, 206)
            try:
                for i in range(len(data)):
                    self.wfile.write(data[i : i + 1])
                    self.wfile.flush()
                    count(1)
                    time.sleep(TRICKLE_SECONDS)
            except (BrokenPipeError, ConnectionResetError):
                pass
            return
        if fault == "garbage":
            data = bytes((i * 7 + 3) % 251 for i in range(len(data)))
        length = len(data)
        sent_range = (start, end)
        if fault == "wrong-range":
            sent_range = (start + 1, end + 1)
        self.send_response(206)
        self.send_header("Content-Range", f"bytes {sent_range[0]}-{sent_range[1]}/{size}")
        self.send_header("Content-Length", str(length))
        self.send_header("Content-Type", "application/octet-stream")
        self.end_headers()
        record(self, 206)
        if fault == "truncated":
            data = data[: length // 2]
            self.close_connection = True
        try:
            self.wfile.write(data)
            count(len(data))
        except (BrokenPipeError, ConnectionResetError):
            pass


def run_range(storage, fault, other_origin, tls):
    if fault not in FAULTS:
        sys.exit(f"unknown fault {fault!r}, expected one of {sorted(FAULTS)}")
    server = ThreadingHTTPServer(("127.0.0.1", 0), RangeHandler)
    server.daemon_threads = True
    port = server.server_address[1]
    scheme = "http"
    if tls:
        import ssl

        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(*tls)
        server.socket = context.wrap_socket(server.socket, server_side=True)
        scheme = "https"
    RangeHandler.storage = storage
    RangeHandler.fault = fault
    RangeHandler.other_origin = other_origin
    RangeHandler.origin = f"{scheme}://127.0.0.1:{port}"
    announce(port, {"read": READ_TOKEN, "href": HREF_TOKEN})
    server.serve_forever()


# ---------------------------------------------------------------- proxy


def run_proxy():
    import socketserver

    class Proxy(socketserver.StreamRequestHandler):
        def handle(self):
            line = self.rfile.readline().decode("latin-1").strip()
            while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                pass
            method, target, _ = (line.split(" ") + ["", ""])[:3]
            if method == "GET" and target == "/_stats":
                body = stats_body()
                self.wfile.write(
                    b"HTTP/1.0 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body) + body
                )
                return
            with STATS_LOCK:
                STATS["requests"].append({"method": method, "path": target, "headers": {}})
            if method != "CONNECT":
                self.wfile.write(b"HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\n\r\n")
                return
            port = int(target.rsplit(":", 1)[1])
            upstream = socket.create_connection(("127.0.0.1", port))
            self.wfile.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
            self.wfile.flush()

            def pump(src, dst):
                try:
                    while data := src.recv(65536):
                        dst.sendall(data)
                except OSError:
                    pass
                finally:
                    try:
                        dst.shutdown(socket.SHUT_WR)
                    except OSError:
                        pass

            t = threading.Thread(target=pump, args=(upstream, self.connection), daemon=True)
            t.start()
            pump(self.connection, upstream)
            t.join()
            upstream.close()

    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Proxy)
    server.daemon_threads = True
    announce(server.server_address[1], {})
    server.serve_forever()


def main():
    args = sys.argv[1:]
    exit_when_stdin_closes()
    if args[0] == "proxy":
        return run_proxy()
    kind, storage = args[0], args[1]
    os.makedirs(storage, exist_ok=True)
    if kind == "giftless":
        run_giftless(storage, "--auth" in args)
    elif kind == "range":
        fault = args[args.index("--fault") + 1] if "--fault" in args else "none"
        other = args[args.index("--other-origin") + 1] if "--other-origin" in args else None
        tls = None
        if "--tls" in args:
            i = args.index("--tls")
            tls = (args[i + 1], args[i + 2])
        run_range(storage, fault, other, tls)
    else:
        sys.exit(f"unknown server kind {kind!r}")


if __name__ == "__main__":
    main()
