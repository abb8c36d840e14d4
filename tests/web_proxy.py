"""A reverse proxy for tests/web_chromium.sh: listens on 127.0.0.1:PORT,
forwards each GET to hpc-web's Unix socket with X-Forwarded-User set to USER
(any such header from the browser is dropped, as a real proxy must), and
logs every path it forwards to LOG.

Usage: python3 web_proxy.py PORT SOCKET USER LOG"""

import http.client
import http.server
import socket
import sys

PORT, SOCK, USER, LOG = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]


class UnixConnection(http.client.HTTPConnection):
    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(SOCK)


class Proxy(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        with open(LOG, "a", encoding="utf-8") as log:
            log.write(self.path + "\n")
        headers = {k: v for k, v in self.headers.items() if k.lower() not in ("x-forwarded-user", "host")}
        headers["X-Forwarded-User"] = USER
        conn = UnixConnection("localhost")
        conn.request("GET", self.path, headers=headers)
        resp = conn.getresponse()
        body = resp.read()
        self.send_response(resp.status)
        for k, v in resp.getheaders():
            if k.lower() not in ("transfer-encoding", "connection", "content-length"):
                self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


http.server.ThreadingHTTPServer(("127.0.0.1", PORT), Proxy).serve_forever()
