// The TypeScript MCP SDK's client (@modelcontextprotocol/sdk 1.x, pinned in ../package.json)
// against mcpbench's reference server.
//
//   node ts_client.mjs '[{"label":"http","transport":"http","url":"http://127.0.0.1:PORT/mcp"},
//                        {"label":"stdio","transport":"stdio","command":["mcpbench","serve","--stdio"]}]'
//
// transport: http (StreamableHTTPClientTransport), sse (SSEClientTransport), stdio
// (StdioClientTransport), ws (WebSocketClientTransport; needs a global WebSocket: Node 22).
// For each case: connect (initialize), list the tools (every page), call each built-in tool
// once, close. Prints one JSON object on stdout, {label: verdict}, and exits 0; the test decides
// what is right. Verdict: {protocol_version, server_name, tools, calls: {tool: {is_error, text}
// | {exception}}, progress: [values]} or {error}.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { SSEClientTransport } from '@modelcontextprotocol/sdk/client/sse.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { WebSocketClientTransport } from '@modelcontextprotocol/sdk/client/websocket.js';

const CALLS = [
  ['echo', { message: 'interop-echo' }],
  ['sleep', { ms: 5 }],
  ['payload', { bytes: 64 }],
  ['fail', { message: 'on purpose' }],
  ['cpu', { iterations: 1000 }],
  ['progress', { steps: 3, interval_ms: 1 }],
  ['search-contacts', { query: 'Leanne' }],
  ['get-invoice', { id: 7 }],
  ['create-ticket', { title: 'interop ticket', priority: 'low' }],
];

function transportFor(c) {
  switch (c.transport) {
    case 'http': return new StreamableHTTPClientTransport(new URL(c.url));
    case 'sse': return new SSEClientTransport(new URL(c.url));
    case 'ws': return new WebSocketClientTransport(new URL(c.url));
    case 'stdio': return new StdioClientTransport({ command: c.command[0], args: c.command.slice(1), stderr: 'ignore' });
    default: throw new Error(`unknown transport ${c.transport}`);
  }
}

/// Sees every message the server sends (to read the negotiated revision off the initialize
/// result, which the 1.x Client does not expose).
function sniff(transport, seen) {
  let handler;
  Object.defineProperty(transport, 'onmessage', {
    configurable: true,
    get: () => handler,
    set: (h) => {
      handler = h && ((msg, extra) => {
        if (msg && msg.result && typeof msg.result.protocolVersion === 'string') {
          seen.protocolVersion = msg.result.protocolVersion;
        }
        return h(msg, extra);
      });
    },
  });
}

async function runCase(c) {
  const verdict = { calls: {}, progress: [] };
  const transport = transportFor(c);
  const seen = {};
  sniff(transport, seen);
  const client = new Client({ name: 'mcpbench-interop-ts', version: '0.0.1' });
  await client.connect(transport, { timeout: 30000 });
  try {
    verdict.protocol_version = seen.protocolVersion ?? null;
    verdict.server_name = client.getServerVersion()?.name ?? null;
    const tools = [];
    let cursor;
    do {
      const page = await client.listTools(cursor ? { cursor } : {});
      tools.push(...page.tools.map((t) => t.name));
      cursor = page.nextCursor;
    } while (cursor);
    verdict.tools = tools;
    for (const [name, args] of CALLS) {
      try {
        const r = await client.callTool({ name, arguments: args }, undefined, {
          timeout: 30000,
          onprogress: name === 'progress' ? (p) => verdict.progress.push(p.progress) : undefined,
        });
        const text = (r.content ?? []).filter((b) => b.type === 'text').map((b) => b.text).join('');
        verdict.calls[name] = { is_error: Boolean(r.isError), text };
      } catch (e) {
        verdict.calls[name] = { exception: String(e && e.message ? e.message : e) };
      }
    }
  } finally {
    await client.close();
  }
  return verdict;
}

const cases = JSON.parse(process.argv[2]);
const out = {};
for (const c of cases) {
  try {
    out[c.label] = await runCase(c);
  } catch (e) {
    out[c.label] = { error: String(e && e.stack ? e.stack : e) };
  }
}
process.stdout.write(JSON.stringify(out) + '\n');
process.exit(0);
