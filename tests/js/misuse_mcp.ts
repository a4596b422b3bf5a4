// Misuse that mcp.d.ts must refuse: each line marked refused is an error of
// tsc --strict, and no other line is (tests/suites/55-integrations-mcp.sh).
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { Ledger, type LoadableDatabase } from 'sqlite-idempotency';
import { withIdempotency, idempotentTool } from 'sqlite-idempotency/mcp';

declare const db: LoadableDatabase; // a better-sqlite3 connection
const ledger = Ledger.open(db);
const server = new McpServer({ name: 'x', version: '1' });
withIdempotency({}, ledger); // refused
withIdempotency(server, {}); // refused
withIdempotency(server, ledger, { tenant: 'tenant-a' }); // refused
withIdempotency(server, ledger, { waitMs: '5' }); // refused
idempotentTool(ledger, 'x', {}, async () => 'not a result'); // refused
idempotentTool(ledger, 7, {}, async () => ({ content: [] })); // refused
withIdempotency(server, ledger, { strict: 'yes' }); // refused
withIdempotency(server, ledger, { windowSeconds: '600' }); // refused
withIdempotency(server, ledger, { conversation: () => 7 }); // refused
withIdempotency(server, ledger, { tenant: () => 'a' });
