"""Serves an ASGI app on 127.0.0.1, on a port the kernel picks, for the interop tests.

Prints `mcpbench-interop listening 127.0.0.1:PORT` on stderr before serving; the tests read it
(no port is ever chosen by hand, so parallel tests never race for one).
"""

import socket
import sys

import anyio
import uvicorn


def serve(app) -> None:
    # proto=IPPROTO_TCP matters: asyncio sets TCP_NODELAY on accepted connections only when the
    # listener says TCP, and without it every keep-alive response waits ~40 ms (Nagle meets
    # delayed ACK) — a latency artefact of the harness, not of the peer.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    host, port = sock.getsockname()
    print(f"mcpbench-interop listening {host}:{port}", file=sys.stderr, flush=True)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    anyio.run(lambda: server.serve(sockets=[sock]))
