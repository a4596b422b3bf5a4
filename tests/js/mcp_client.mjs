// A client process of the end-to-end tests (test_mcp.mjs): the SDK's Client
// over stdio (spawning its own mcp_server.mjs) or over Streamable HTTP with a
// bearer token. It connects, prints READY, waits for GO on stdin, makes one
// tools/call and prints its CallToolResult as one JSON line (or
// {"threw": message}). CONVERSATION "-" sends no _meta.
//
//   node mcp_client.mjs stdio DB TARGET_URL TENANT ARGS_JSON CONVERSATION
//   node mcp_client.mjs http URL TOKEN ARGS_JSON CONVERSATION
import readline from 'node:readline';
import { connect, callSend } from './mcp_connect.mjs';

const [mode, ...rest] = process.argv.slice(2);
const client = mode === 'stdio'
  ? await connect({ mode, db: rest[0], target: rest[1], tenant: rest[2] })
  : await connect({ mode, url: rest[0], token: rest[1] });
const [argsJson, conversation] = mode === 'stdio' ? rest.slice(3) : rest.slice(2);
process.stdout.write('READY\n');
const rl = readline.createInterface({ input: process.stdin });
await new Promise((resolve) => rl.once('line', resolve));
rl.close();
let line;
try {
  line = JSON.stringify(await callSend(client, JSON.parse(argsJson), conversation === '-' ? undefined : conversation));
} catch (e) {
  line = JSON.stringify({ threw: e.message });
}
process.stdout.write(`${line}\n`);
await client.close();
