#!/usr/bin/env python3
"""A minimal OTLP/HTTP traces endpoint for benchmarks: accepts every export with 200 and an
empty ExportTraceServiceResponse, and counts requests and bytes. Prints its URL, then
the totals when stopped (SIGTERM or Ctrl-C).

Usage: tools/bench/otlp_sink.py [PORT]
"""
import http.server
import signal
import sys

received = {"requests": 0, "bytes": 0}


class Sink(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        length = int(self.headers.get("content-length", "0"))
        self.rfile.read(length)
        received["requests"] += 1
        received["bytes"] += length
        self.send_response(200)
        self.send_header("content-type", "application/x-protobuf")
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


def main():
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 0
    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Sink)
    print(f"http://127.0.0.1:{server.server_address[1]}", flush=True)

    def stop(*_):
        print(f"{received['requests']} exports, {received['bytes']} bytes", flush=True)
        sys.exit(0)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    server.serve_forever()


if __name__ == "__main__":
    main()
