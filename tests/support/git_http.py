#!/usr/bin/env python3
"""A smart-HTTP git server for tests: `git http-backend` behind Basic auth, on 127.0.0.1.

Usage: git_http.py PROJECT_ROOT CREDENTIALS_LOG [CERT_PEM KEY_PEM]
Prints the port it listens on, then serves until killed. Every request without
credentials gets 401 with a Basic challenge (as GitHub does); the user names and
passwords it receives are appended to CREDENTIALS_LOG, one `user:password` per line.
With CERT_PEM and KEY_PEM it serves https with that certificate chain and key (a
client that refuses the certificate is dropped and the server goes on).
"""
import base64
import http.server
import os
import subprocess
import sys

ROOT, LOG = sys.argv[1], sys.argv[2]


class Handler(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def _serve(self):
        auth = self.headers.get("Authorization", "")
        if not auth.startswith("Basic "):
            self.send_response(401)
            self.send_header("WWW-Authenticate", 'Basic realm="fanout-test"')
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        user, _, password = base64.b64decode(auth[6:]).decode().partition(":")
        with open(LOG, "a") as f:
            f.write(f"{user}:{password}\n")
        path, _, query = self.path.partition("?")
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            body = b""
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip(), 16)
                if size == 0:
                    self.rfile.readline()
                    break
                body += self.rfile.read(size)
                self.rfile.readline()
        else:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
        env = dict(
            os.environ,
            GIT_PROJECT_ROOT=ROOT,
            GIT_HTTP_EXPORT_ALL="1",
            PATH_INFO=path,
            QUERY_STRING=query,
            REQUEST_METHOD=self.command,
            CONTENT_TYPE=self.headers.get("Content-Type", ""),
            CONTENT_LENGTH=str(len(body)),
            REMOTE_USER=user,
            REMOTE_ADDR="127.0.0.1",
            GIT_CONFIG_GLOBAL="/dev/null",
        )
        if self.headers.get("Content-Encoding") == "gzip":
            env["HTTP_CONTENT_ENCODING"] = "gzip"
        out = subprocess.run(["git", "http-backend"], input=body, env=env, capture_output=True).stdout
        head, _, payload = out.partition(b"\r\n\r\n")
        status = 200
        headers = []
        for line in head.split(b"\r\n"):
            name, _, value = line.decode().partition(":")
            if name.lower() == "status":
                status = int(value.strip().split()[0])
            elif name:
                headers.append((name, value.strip()))
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    do_GET = _serve
    do_POST = _serve


server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
if len(sys.argv) > 4:
    import ssl

    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(sys.argv[3], sys.argv[4])
    server.socket = context.wrap_socket(server.socket, server_side=True)
print(server.server_address[1], flush=True)
server.serve_forever()
