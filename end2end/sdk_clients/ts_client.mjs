// The official TypeScript MCP SDK as an agent: connects to /mcp with an agent key, lists
// the tools, ends the session (`DELETE /mcp`, as an SDK client does when it is done) and
// closes. Usage: node ts_client.mjs URL KEY. Prints `TOOLS n` and `CLOSED` on stdout;
// anything the SDK reports goes to stderr and fails the run.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

const [url, key] = process.argv.slice(2);
const transport = new StreamableHTTPClientTransport(new URL(url), {
  requestInit: { headers: { Authorization: `Bearer ${key}` } },
});
const client = new Client({ name: 'skillgate-e2e-ts', version: '1.0.0' });
client.onerror = (error) => console.error(`ERROR client: ${error?.stack ?? error}`);
transport.onerror = (error) => console.error(`ERROR transport: ${error?.stack ?? error}`);

await client.connect(transport);
if (!transport.sessionId) throw new Error('the server issued no Mcp-Session-Id, so there is no close to test');
const { tools } = await client.listTools();
console.log(`TOOLS ${tools.length}`);
await transport.terminateSession();
await client.close();
console.log('CLOSED');
