"""The Python MCP SDK's client (PyPI `mcp` 2.x, `mcp.Client`) against mcpbench's reference server.

    python py_client.py '[{"label": "http", "mode": "auto", "transport": "http", "target": ["http://127.0.0.1:PORT/mcp"]},
                          {"label": "stdio", "mode": "legacy", "transport": "stdio", "target": ["mcpbench", "serve", "--stdio"]}]'

One process runs every case (the SDK takes seconds to import). `mode` is the SDK's connect mode:
`legacy` (initialize handshake), `auto` (probe server/discover, fall back to initialize) or a
modern revision such as `2026-07-28` (adopted without a probe). `transport`: `http` (Streamable
HTTP), `sse` (legacy HTTP+SSE) or `stdio` (`target` is the command). For each case the client
connects, lists the tools (every page), calls each built-in tool once and closes.

Prints one JSON object on stdout, {label: verdict}, and exits 0; the test decides what is right.
Verdict: {"protocol_version", "server_name", "tools": [names], "calls": {tool: {"is_error",
"text"} | {"exception"}}, "progress": [values seen during the `progress` call]}, or {"error"}
if the case failed outside a call.
"""

import json
import sys
import traceback

import anyio
from mcp import Client
from mcp.client.sse import sse_client
from mcp.client.stdio import StdioServerParameters

CALLS = [
    ("echo", {"message": "interop-echo"}),
    ("sleep", {"ms": 5}),
    ("payload", {"bytes": 64}),
    ("fail", {"message": "on purpose"}),
    ("cpu", {"iterations": 1000}),
    ("progress", {"steps": 3, "interval_ms": 1}),
    ("search-contacts", {"query": "Leanne"}),
    ("get-invoice", {"id": 7}),
    ("create-ticket", {"title": "interop ticket", "priority": "low"}),
]


def server_of(case):
    t, target = case["transport"], case["target"]
    if t == "stdio":
        return StdioServerParameters(command=target[0], args=target[1:])
    if t == "sse":
        return sse_client(target[0])
    if t == "http":
        return target[0]
    raise ValueError(f"unknown transport {t!r}")


async def run_case(case) -> dict:
    verdict: dict = {"calls": {}, "progress": []}
    async with Client(server_of(case), mode=case["mode"], read_timeout_seconds=30) as client:
        verdict["protocol_version"] = client.protocol_version
        info = client.server_info
        verdict["server_name"] = info.name if info else None
        tools, cursor = [], None
        while True:
            page = await (client.list_tools(cursor=cursor) if cursor else client.list_tools())
            tools += [t.name for t in page.tools]
            cursor = page.next_cursor
            if not cursor:
                break
        verdict["tools"] = tools

        async def on_progress(progress, total, message):
            verdict["progress"].append(progress)

        for name, args in CALLS:
            try:
                r = await client.call_tool(
                    name, args, progress_callback=on_progress if name == "progress" else None
                )
                text = "".join(c.text for c in r.content if getattr(c, "type", "") == "text")
                verdict["calls"][name] = {"is_error": bool(r.is_error), "text": text}
            except Exception as e:  # this call failed: recorded, the others still run
                verdict["calls"][name] = {"exception": f"{type(e).__name__}: {e}"}
    return verdict


async def run_all(cases) -> dict:
    out = {}
    for case in cases:
        try:
            with anyio.fail_after(60):
                out[case["label"]] = await run_case(case)
        except BaseException as e:  # noqa: BLE001 - the verdict names whatever went wrong
            out[case["label"]] = {"error": f"{type(e).__name__}: {e}", "trace": traceback.format_exc()}
    return out


def main() -> None:
    print(json.dumps(anyio.run(run_all, json.loads(sys.argv[1]))))


if __name__ == "__main__":
    main()
