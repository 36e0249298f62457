"""A `fastmcp` (PyPI, 4.x) server as an interop peer.

    python fm_server.py stdio | http | sse

Network modes bind 127.0.0.1 on a port the kernel picks and say where on stderr (listen.py).
`http` is fastmcp's Streamable HTTP at /mcp (stateful, SSE responses), `sse` the legacy
HTTP+SSE transport at /sse. Tools: `echo {message}`, `add {a, b}`, `fail {message}` (isError).
"""

import sys

from fastmcp import FastMCP
from fastmcp.exceptions import ToolError

from listen import serve

mcp = FastMCP("fastmcp-echo")


@mcp.tool
def echo(message: str) -> str:
    """Returns the message."""
    return message


@mcp.tool
def add(a: int, b: int) -> int:
    """Adds two integers."""
    return a + b


@mcp.tool
def fail(message: str) -> str:
    """Always fails: a tool execution error (isError: true)."""
    raise ToolError(f"failing on purpose: {message}")


def main() -> None:
    mode = sys.argv[1] if len(sys.argv) > 1 else "stdio"
    if mode == "stdio":
        mcp.run("stdio", show_banner=False)
    elif mode == "http":
        serve(mcp.http_app(transport="http"))
    elif mode == "sse":
        serve(mcp.http_app(transport="sse"))
    else:
        sys.exit(f"unknown mode {mode!r}")


if __name__ == "__main__":
    main()
