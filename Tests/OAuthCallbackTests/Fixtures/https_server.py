#!/usr/bin/env python3
"""Loopback HTTPS server for the outbound HTTP client tests (stdlib only).

usage: https_server.py CERT KEY
Listens on 127.0.0.1, port chosen by the kernel, and prints the port on stdout.
Exits when its stdin closes (the test process went away).

Routes:
  /json                        200 {"ok": true, ...}
  /echo                        200 JSON of the request: method, path, headers (in order), body (base64)
  /slow?ms=N                   waits N ms, then 200
  /big?n=N[&chunked=1]         200 with N bytes of body (chunked: without Content-Length)
  /status/N                    status N, small body
  /count                       200 {"connection": id of this connection, "connections": total accepted}
  /close-before-response/...   reads the request, then closes the connection without answering
  /stats                       200 {path: times requested} for every path (query excluded) seen so far
"""
import base64
import json
import os
import socket
import socketserver
import ssl
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, HTTPServer
from urllib.parse import parse_qs, urlsplit

lock = threading.Lock()
stats = {}
connections = 0


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def setup(self):
        # The TLS handshake happens here, on this connection's own thread, so a slow or failing
        # handshake never holds up accept().
        global connections
        # Headers and body go out in separate writes: without this, Nagle plus the client's
        # delayed ACK add 40 ms to every response.
        self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            self.request = self.server.context.wrap_socket(self.request, server_side=True)
        except (ssl.SSLError, OSError):
            self.handshake_failed = True
        else:
            self.handshake_failed = False
        with lock:
            connections += 1
            self.connection_id = connections
        super().setup()

    def handle(self):
        if self.handshake_failed:
            return
        try:
            super().handle()
        except (ssl.SSLError, ConnectionError):
            pass

    def log_message(self, *args):
        pass

    def body(self):
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def reply(self, status, payload, content_type="application/json"):
        if isinstance(payload, (dict, list)):
            payload = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def route(self):
        url = urlsplit(self.path)
        query = parse_qs(url.query)
        with lock:
            stats[url.path] = stats.get(url.path, 0) + 1
        body = self.body()
        if url.path == "/json":
            self.reply(200, {"ok": True, "method": self.command})
        elif url.path == "/echo":
            self.reply(200, {
                "method": self.command,
                "path": self.path,
                "headers": [[k, v] for k, v in self.headers.items()],
                "body": base64.b64encode(body).decode(),
            })
        elif url.path == "/slow":
            time.sleep(int(query.get("ms", ["1000"])[0]) / 1000)
            self.reply(200, {"slow": True})
        elif url.path == "/big" and query.get("chunked") == ["1"]:
            # No Content-Length: the client only learns the size while reading.
            n = int(query.get("n", ["0"])[0])
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            while n > 0:
                chunk = min(n, 1024)
                self.wfile.write(b"%x\r\n" % chunk + b"x" * chunk + b"\r\n")
                n -= chunk
            self.wfile.write(b"0\r\n\r\n")
        elif url.path == "/big":
            self.reply(200, b"x" * int(query.get("n", ["0"])[0]), "application/octet-stream")
        elif url.path.startswith("/status/"):
            self.reply(int(url.path.split("/")[2]), {"status": True})
        elif url.path == "/count":
            with lock:
                total = connections
            self.reply(200, {"connection": self.connection_id, "connections": total})
        elif url.path.startswith("/close-before-response"):
            self.close_connection = True
            try:
                self.request.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        elif url.path == "/stats":
            with lock:
                snapshot = dict(stats)
            self.reply(200, snapshot)
        else:
            self.reply(404, {"error": "no such route"})

    do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = route


class Server(socketserver.ThreadingMixIn, HTTPServer):
    daemon_threads = True
    request_queue_size = 256  # 50 concurrent connects must not overflow the backlog


def main():
    cert, key = sys.argv[1], sys.argv[2]
    server = Server(("127.0.0.1", 0), Handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.context = context
    print(server.server_address[1], flush=True)

    def watch_stdin():
        sys.stdin.read()
        os._exit(0)

    threading.Thread(target=watch_stdin, daemon=True).start()
    server.serve_forever()


if __name__ == "__main__":
    main()
