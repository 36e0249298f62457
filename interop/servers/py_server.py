"""The Python MCP SDK's server (PyPI `mcp` 2.x, `MCPServer`) as an interop peer.

    python py_server.py stdio
    python py_server.py sse | http | http-json | http-stateless

Network modes bind 127.0.0.1 on a port the kernel picks and say where on stderr (listen.py).
`http` is stateful Streamable HTTP with SSE responses (the SDK default), `http-json` stateful
with JSON responses, `http-stateless` stateless with JSON responses; `sse` is the legacy
HTTP+SSE transport (GET /sse, POST /messages/). Every HTTP mode also answers 2026-07-28
requests (server/discover, `_meta`, no session).

Tools: `echo {message}` (returns the message), `add {a, b}`, `fail {message}` (raises, so the
result is `isError: true`).
"""

import sys

from listen import serve
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

mcp = MCPServer("sdk-echo")


@mcp.tool()
def echo(message: str) -> str:
    """Returns the message."""
    return message


@mcp.tool()
def add(a: int, b: int) -> int:
    """Adds two integers."""
    return a + b


@mcp.tool()
def fail(message: str) -> str:
    """Always fails: a tool execution error (isError: true)."""
    # ToolError, not any exception: the SDK logs anything else as unexpected, with a
    # rich-rendered traceback that holds the event loop (every session) for ~1 s.
    raise ToolError(f"failing on purpose: {message}")


def main() -> None:
    mode = sys.argv[1] if len(sys.argv) > 1 else "stdio"
    if mode == "stdio":
        mcp.run("stdio")
    elif mode == "sse":
        serve(mcp.sse_app())
    elif mode == "http":
        serve(mcp.streamable_http_app())
    elif mode == "http-json":
        serve(mcp.streamable_http_app(json_response=True))
    elif mode == "http-stateless":
        serve(mcp.streamable_http_app(stateless_http=True, json_response=True))
    else:
        sys.exit(f"unknown mode {mode!r}")


if __name__ == "__main__":
    main()
