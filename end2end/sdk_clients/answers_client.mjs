// The official TypeScript MCP SDK as an agent that reads call_tool's answers: the same
// calls as answers_client.py. The SDK checks every structuredContent it gets, refusals
// included, against the outputSchema call_tool publishes, and throws when one does not
// fit. Usage: node answers_client.mjs URL KEY CALLS (answers_calls.json). Prints
// `RESULT <json>`; anything the SDK reports goes to stderr.
import { readFileSync } from 'node:fs';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

const [url, key, callsFile] = process.argv.slice(2);
const calls = JSON.parse(readFileSync(callsFile, 'utf8'));
const transport = new StreamableHTTPClientTransport(new URL(url), {
  requestInit: { headers: { Authorization: `Bearer ${key}` } },
});
const client = new Client({ name: 'skillgate-e2e-answers', version: '1.0.0' });
client.onerror = (error) => console.error(`ERROR client: ${error?.stack ?? error}`);

await client.connect(transport);
const { tools } = await client.listTools();
const outputSchema = tools.find((t) => t.name === 'call_tool')?.outputSchema !== undefined;
const init = await client.callTool({ name: 'init_skilder', arguments: { task_summary: 'refund an order' } });
const session = init.structuredContent.session_id;
await client.callTool({ name: 'learn', arguments: { path: '/roles/tier-1-support', session_id: session } });
const answers = [];
for (const [tool, args] of calls) {
  const result = await client.callTool({ name: 'call_tool', arguments: { tool, arguments: args, session_id: session } });
  const s = result.structuredContent ?? {};
  answers.push({
    tool,
    is_error: result.isError === true,
    decision: s.decision ?? null,
    code: s.code ?? null,
    remedy: s.remedy?.type ?? null,
    has_result: 'result' in s,
    hold_id: s.hold_id ?? null,
  });
}
await transport.terminateSession();
await client.close();
console.log(`RESULT ${JSON.stringify({ output_schema: outputSchema, answers })}`);
