// A minimal MCP client for the specs: JSON-RPC over streamable HTTP with plain fetch, and
// the skillgate CLI for keys and users. No SDK, so the spec sees exactly what goes over
// the wire.
import { execFileSync } from 'node:child_process';
import { BASE } from './browser.js';

const BIN = process.env.SKILLGATE_BIN;
const DATABASE_URL = process.env.SKILLGATE_DATABASE_URL;

/** `skillgate key create`; returns the key it printed once. */
export function createKey(name, scope) {
  const out = execFileSync(BIN, ['key', 'create', '--name', name, '--scope', scope, '--database-url', DATABASE_URL], { encoding: 'utf8' });
  const match = out.match(new RegExp(`agent key for scope ${scope}: (\\S+)`));
  if (!match) throw new Error(`no key in: ${out}`);
  return match[1];
}

/** The JSON-RPC message in a response that is either JSON or a server-sent event stream. */
async function message(response) {
  const type = response.headers.get('content-type') ?? '';
  const text = await response.text();
  if (type.includes('text/event-stream')) {
    const data = text.split('\n').filter((l) => l.startsWith('data:')).map((l) => l.slice(5).trim()).filter(Boolean);
    for (const d of data) {
      const parsed = JSON.parse(d);
      if ('result' in parsed || 'error' in parsed) return parsed;
    }
    throw new Error(`no JSON-RPC answer in the event stream: ${text}`);
  }
  return JSON.parse(text);
}

export class McpClient {
  constructor(key) {
    this.key = key;
    this.session = null;
    this.protocol = null;
    this.nextId = 1;
  }

  async post(body) {
    const headers = {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      authorization: `Bearer ${this.key}`,
    };
    if (this.session) headers['mcp-session-id'] = this.session;
    if (this.protocol) headers['mcp-protocol-version'] = this.protocol;
    const response = await fetch(`${BASE}/mcp`, { method: 'POST', headers, body: JSON.stringify(body) });
    if (!response.ok && response.status !== 202) throw new Error(`/mcp answered ${response.status}: ${await response.text()}`);
    return response;
  }

  async request(method, params) {
    const response = await this.post({ jsonrpc: '2.0', id: this.nextId++, method, params });
    const answer = await message(response);
    if (answer.error) throw new Error(`${method}: ${JSON.stringify(answer.error)}`);
    return { answer: answer.result, response };
  }

  async connect() {
    const { answer, response } = await this.request('initialize', {
      protocolVersion: '2025-06-18',
      capabilities: {},
      clientInfo: { name: 'skillgate-e2e', version: '1' },
    });
    this.session = response.headers.get('mcp-session-id');
    this.protocol = answer.protocolVersion;
    await this.post({ jsonrpc: '2.0', method: 'notifications/initialized' });
    return this;
  }

  /** Calls a platform tool; returns `{text, structured, isError}`. */
  async tool(name, args) {
    const { answer } = await this.request('tools/call', { name, arguments: args });
    return {
      text: (answer.content ?? []).filter((c) => c.type === 'text').map((c) => c.text).join('\n'),
      structured: answer.structuredContent,
      isError: answer.isError === true,
    };
  }

  /** `init_skilder` then `learn /roles/ROLE`; returns the session id and what was learned. */
  async learnRole(role) {
    const init = await this.tool('init_skilder', {});
    const sessionId = init.structured.session_id;
    const learned = await this.tool('learn', { path: `/roles/${role}`, session_id: sessionId });
    if (learned.isError) throw new Error(`learn ${role}: ${learned.text}`);
    return { sessionId, learned };
  }

  /** `call_tool` through the gateway. */
  async call(sessionId, tool, args) {
    return this.tool('call_tool', { tool, arguments: args, session_id: sessionId });
  }
}
