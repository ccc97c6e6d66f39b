// The official TypeScript MCP SDK (its experimental 2025-11-25 tasks) as an agent that waits
// on a held refund as a task. Usage: node tasks_client.mjs URL KEY MODE, MODE `approve` (wait
// on the task until it ends: the spec approves the hold in the console meanwhile) or `cancel`
// (cancel the task, then list the agent's tasks). Prints `HELD <statusMessage>` once the
// task is made, then `RESULT <json>`; anything the SDK reports goes to stderr.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { CallToolResultSchema } from '@modelcontextprotocol/sdk/types.js';

const [url, key, mode] = process.argv.slice(2);
const transport = new StreamableHTTPClientTransport(new URL(url), {
  requestInit: { headers: { Authorization: `Bearer ${key}` } },
});
const client = new Client({ name: 'skillgate-e2e-tasks', version: '1.0.0' });
client.onerror = (error) => console.error(`ERROR client: ${error?.stack ?? error}`);

await client.connect(transport);
const capabilities = client.getServerCapabilities();
const { tools } = await client.listTools();
const init = await client.callTool({ name: 'init_skilder', arguments: {} });
const session = init.structuredContent.session_id;
await client.callTool({ name: 'learn', arguments: { path: '/roles/tier-1-support', session_id: session } });
await client.callTool({
  name: 'call_tool',
  arguments: { tool: 'check_refund_eligibility', arguments: { customer_id: 'C-1003', order_id: 'O-5005' }, session_id: session },
});

const refund = {
  name: 'call_tool',
  arguments: {
    tool: 'process_refund',
    session_id: session,
    arguments: { customer_id: 'C-1003', order_id: 'O-5005', amount: 300, reason: `Premium support not delivered (${mode})` },
  },
};
const out = {
  server_tasks: capabilities?.tasks ?? null,
  call_tool_task_support: tools.find((t) => t.name === 'call_tool')?.execution?.taskSupport ?? null,
  statuses: [],
};
// The SDK adds the task itself: call_tool is marked optional and the server declares tasks.
for await (const message of client.experimental.tasks.callToolStream(refund, CallToolResultSchema)) {
  if (message.type === 'taskCreated') {
    out.task_id = message.task.taskId;
    out.created_status = message.task.status;
    console.log(`HELD ${message.task.statusMessage}`);
    if (mode === 'cancel') {
      const cancelled = await client.experimental.tasks.cancelTask(message.task.taskId);
      out.cancelled_status = cancelled.status;
      const { tasks } = await client.experimental.tasks.listTasks();
      out.listed = tasks.map((t) => [t.taskId, t.status]);
      const withdrawn = await client.experimental.tasks.getTaskResult(message.task.taskId, CallToolResultSchema);
      out.result = { is_error: withdrawn.isError === true, code: withdrawn.structuredContent?.code ?? null };
      break;
    }
  } else if (message.type === 'taskStatus') {
    out.statuses.push(message.task.status);
  } else if (message.type === 'result') {
    const { result } = message;
    out.result = {
      is_error: result.isError === true,
      code: result.structuredContent?.code ?? null,
      related_task: result._meta?.['io.modelcontextprotocol/related-task']?.taskId ?? null,
    };
  } else if (message.type === 'error') {
    out.error = message.error.message;
  }
}
await client.close();
console.log(`RESULT ${JSON.stringify(out)}`);
