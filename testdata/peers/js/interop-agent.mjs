// The @a2a-js/sdk 1.3.0 agent of writ's interop matrix (internal/interop): one
// server that every client of the matrix can reach, so it speaks A2A 1.0 and,
// with the SDK's legacyCompat layer, 0.3 (the a2a-go 0.3 client).
//
//   node interop-agent.mjs [--port 0] [--delay MS] [--ignore-stdin]
//
// A message whose text contains "slow" makes a task that stays working until
// it is cancelled (-> canceled) or --delay ms (default 30000) pass; any other
// message is screened at once: working -> artifact "sanctions-screening" ->
// completed "Screening complete.". Cancelling a terminal task answers
// TaskNotCancelable (-32002).
//
// JSON-RPC at POST /, HTTP+JSON at the A2A paths, both with legacyCompat on;
// the card (/.well-known/agent-card.json) lists the 1.0 interfaces first, then
// the 0.3 ones, all at this server. Push is left to writ (the card says no).
//
// Binds 127.0.0.1 only; prints `READY <port>` once listening; exits on
// SIGTERM/SIGINT and when stdin closes unless --ignore-stdin is given.

import http from 'node:http';
import { parseArgs } from 'node:util';
import express from 'express';
import { AgentCard, AGENT_CARD_PATH, Role, TaskState } from '@a2a-js/sdk';
import { DefaultRequestHandler, InMemoryTaskStore, AgentEvent } from '@a2a-js/sdk/server';
import { agentCardHandler, jsonRpcHandler, restHandler, UserBuilder } from '@a2a-js/sdk/server/express';
import { TaskNotCancelableError } from '@a2a-js/sdk/errors';

// stdout carries the READY line only.
console.log = console.info = console.warn = (...a) => process.stderr.write(`${a.join(' ')}\n`);

const { values: args } = parseArgs({
  options: {
    port: { type: 'string', default: '0' },
    delay: { type: 'string', default: '30000' },
    'ignore-stdin': { type: 'boolean', default: false },
  },
});
const delayMs = Number.parseInt(args.delay, 10);

const TERMINAL = [
  TaskState.TASK_STATE_COMPLETED, TaskState.TASK_STATE_FAILED,
  TaskState.TASK_STATE_CANCELED, TaskState.TASK_STATE_REJECTED,
];
const part = (content) => ({ content, metadata: undefined, filename: '', mediaType: '' });
const textPart = (t) => part({ $case: 'text', value: t });
const dataPart = (d) => part({ $case: 'data', value: d });
const now = () => new Date().toISOString();
const textOf = (m) => (m?.parts || []).filter((p) => p.content?.$case === 'text').map((p) => p.content.value).join(' ');

function agentMessage(taskId, contextId, text) {
  return {
    messageId: `agent-${crypto.randomUUID()}`, contextId, taskId, role: Role.ROLE_AGENT,
    parts: [textPart(text)], metadata: undefined, extensions: [], referenceTaskIds: [],
  };
}

class Executor {
  contexts = new Map();
  waiting = new Map();

  status(bus, taskId, contextId, state, text) {
    bus.publish(AgentEvent.statusUpdate({
      taskId, contextId, metadata: undefined,
      status: { state, message: text ? agentMessage(taskId, contextId, text) : undefined, timestamp: now() },
    }));
  }

  async execute(ctx, bus) {
    const { taskId, contextId } = ctx;
    const msg = ctx.userMessage;
    this.contexts.set(taskId, contextId);
    try {
      if (!ctx.task) {
        bus.publish(AgentEvent.task({
          id: taskId, contextId, artifacts: [], history: [msg], metadata: undefined,
          status: { state: TaskState.TASK_STATE_SUBMITTED, message: undefined, timestamp: now() },
        }));
      }
      this.status(bus, taskId, contextId, TaskState.TASK_STATE_WORKING);
      if (textOf(msg).includes('slow')) {
        const cancelled = await new Promise((resolve) => {
          const timer = setTimeout(() => { this.waiting.delete(taskId); resolve(false); }, delayMs);
          this.waiting.set(taskId, () => { clearTimeout(timer); resolve(true); });
        });
        if (cancelled) return; // cancelTask published canceled and finished the bus
      }
      bus.publish(AgentEvent.artifactUpdate({
        taskId, contextId, append: false, lastChunk: true, metadata: undefined,
        artifact: {
          artifactId: 'art-1', name: 'sanctions-screening', description: 'Screening result',
          parts: [textPart('Acme Trading FZE: 1 possible match (score 0.83) against SDN list'),
            dataPart({ matches: 1, top_score: 0.83, list: 'SDN' })],
          metadata: undefined, extensions: [],
        },
      }));
      this.status(bus, taskId, contextId, TaskState.TASK_STATE_COMPLETED, 'Screening complete.');
      bus.finished();
    } finally {
      this.contexts.delete(taskId);
    }
  }

  async cancelTask(taskId, bus) {
    const wake = this.waiting.get(taskId);
    this.waiting.delete(taskId);
    this.status(bus, taskId, this.contexts.get(taskId) || '', TaskState.TASK_STATE_CANCELED, 'Screening cancelled.');
    bus.finished();
    wake?.();
  }
}

class Handler extends DefaultRequestHandler {
  async cancelTask(params, context) {
    const task = await this.taskStore.load(params.id, context);
    if (task && TERMINAL.includes(task.status?.state)) {
      throw new TaskNotCancelableError(`Task not cancelable: ${params.id} is already terminal`);
    }
    return super.cancelTask(params, context);
  }
}

const card = {
  name: 'sanctions-screening-agent',
  description: 'Screens counterparties against sanctions and watch lists.',
  supportedInterfaces: [],
  provider: undefined,
  version: '3.1.0',
  documentationUrl: undefined,
  capabilities: { streaming: true, pushNotifications: false, extendedAgentCard: false, extensions: [] },
  securitySchemes: {},
  securityRequirements: [],
  defaultInputModes: ['text/plain', 'application/json'],
  defaultOutputModes: ['text/plain', 'application/json'],
  skills: [{
    id: 'screen', name: 'Screen a counterparty', description: 'Screen against SDN, UN and local lists.',
    tags: ['sanctions', 'compliance'], examples: [], inputModes: [], outputModes: [], securityRequirements: [],
  }],
  signatures: [],
  iconUrl: undefined,
};

const handler = new Handler(card, new InMemoryTaskStore(), new Executor());
const userBuilder = UserBuilder.noAuthentication;
const legacyCompat = { enabled: true };
const app = express();
app.use(`/${AGENT_CARD_PATH}`, agentCardHandler({ agentCardProvider: async () => AgentCard.toJSON(card) }));
app.post('/', jsonRpcHandler({ requestHandler: handler, userBuilder, legacyCompat }));
app.use(restHandler({ requestHandler: handler, userBuilder, legacyCompat }));

const server = http.createServer(app);
let closing = false;
function shutdown(code) {
  if (closing) return;
  closing = true;
  server.closeAllConnections?.();
  server.close();
  process.exit(code);
}
process.on('SIGTERM', () => shutdown(0));
process.on('SIGINT', () => shutdown(0));
if (!args['ignore-stdin']) {
  process.stdin.on('end', () => shutdown(0));
  process.stdin.on('close', () => shutdown(0));
  process.stdin.on('error', () => shutdown(0));
  process.stdin.resume();
}

server.once('error', (e) => { process.stderr.write(`interop-agent.mjs: ${e.message}\n`); process.exit(1); });
server.listen(Number.parseInt(args.port, 10), '127.0.0.1', () => {
  const { port } = server.address();
  const base = `http://127.0.0.1:${port}`;
  card.supportedInterfaces.push(
    { url: `${base}/`, protocolBinding: 'JSONRPC', tenant: '', protocolVersion: '1.0' },
    { url: base, protocolBinding: 'HTTP+JSON', tenant: '', protocolVersion: '1.0' },
    { url: `${base}/`, protocolBinding: 'JSONRPC', tenant: '', protocolVersion: '0.3' },
  );
  process.stdout.write(`READY ${port}\n`);
});
