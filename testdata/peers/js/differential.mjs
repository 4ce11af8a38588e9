// The real @a2a-js/sdk 1.3.0 server as a witness for writ's parser-differential
// tests (adapters/a2a): what does the SDK act on for a given request body?
//
//   node differential.mjs [--port 0] [--ignore-stdin]
//
// Serves, exactly as an agent would mount them, jsonRpcHandler at POST / and
// restHandler at the A2A paths, both with legacyCompat on (requests without
// `A2A-Version`, or with 0.3, take the SDK's A2A 0.3 layer; `A2A-Version: 1.0`
// takes the 1.0 one). The request handler executes nothing: each call records
// what it was asked to do and fails with TaskNotFound. The record is what the
// SDK's own parsing (express.json → JSON.parse, its params decoders, the 0.3
// conversions) made of the request:
//
//   {op, taskId, contextId, pushUrl, configId}
//
// with op one of send, stream, get, list, cancel, subscribe, push_config.set,
// push_config.get, push_config.list, push_config.delete, card.extended (writ's
// operation names). A request names its case in the `X-Diff-Case` header;
// GET /_diff/records returns {case: [record, ...]} for every case that reached
// the handler (a case the SDK refused before dispatch has no entry), and
// DELETE /_diff/records forgets them.
//
// Binds 127.0.0.1 only; prints `READY <port>` once listening; exits on
// SIGTERM/SIGINT and when stdin closes unless --ignore-stdin is given.

import { AsyncLocalStorage } from 'node:async_hooks';
import { parseArgs } from 'node:util';
import express from 'express';
import { AGENT_CARD_PATH } from '@a2a-js/sdk';
import { DefaultRequestHandler, InMemoryTaskStore } from '@a2a-js/sdk/server';
import { agentCardHandler, jsonRpcHandler, restHandler, UserBuilder } from '@a2a-js/sdk/server/express';
import { TaskNotFoundError } from '@a2a-js/sdk/errors';
import { serve } from './serve.mjs';

// stdout carries the READY line only; the SDK's logging (it logs every refused
// call) is dropped, so the test's stderr stays readable.
console.log = console.info = console.warn = console.error = () => {};

const { values: args } = parseArgs({
  options: {
    port: { type: 'string', default: '0' },
    'ignore-stdin': { type: 'boolean', default: false },
  },
});

const store = new AsyncLocalStorage();
let records = {};

const str = (v) => (v === undefined || v === null ? '' : String(v));

function record(op, fields) {
  const id = store.getStore();
  if (id === undefined) return;
  (records[id] ||= []).push({
    op,
    taskId: str(fields.taskId),
    contextId: str(fields.contextId),
    pushUrl: str(fields.pushUrl),
    configId: str(fields.configId),
  });
}

function refuse() {
  throw new TaskNotFoundError('differential witness: nothing is executed');
}

// The SDK hands the handler its core (A2A 1.0) request objects, whichever
// version and binding the request came in.
function sendFields(params) {
  const push = params?.configuration?.taskPushNotificationConfig;
  return {
    taskId: params?.message?.taskId,
    contextId: params?.message?.contextId,
    pushUrl: push?.url,
  };
}

class Witness extends DefaultRequestHandler {
  async sendMessage(params) { record('send', sendFields(params)); refuse(); }
  async *sendMessageStream(params) { record('stream', sendFields(params)); refuse(); }
  async getTask(params) { record('get', { taskId: params?.id }); refuse(); }
  async listTasks(params) { record('list', { contextId: params?.contextId }); refuse(); }
  async cancelTask(params) { record('cancel', { taskId: params?.id }); refuse(); }
  async *resubscribe(params) { record('subscribe', { taskId: params?.id }); refuse(); }
  async createTaskPushNotificationConfig(params) {
    // 1.0 passes the flat config; the 0.3 layer may nest it.
    const cfg = params?.pushNotificationConfig ?? params;
    record('push_config.set', { taskId: params?.taskId, pushUrl: cfg?.url, configId: cfg?.id });
    refuse();
  }
  async getTaskPushNotificationConfig(params) {
    record('push_config.get', { taskId: params?.taskId, configId: params?.id ?? params?.pushNotificationConfigId });
    refuse();
  }
  async listTaskPushNotificationConfigs(params) { record('push_config.list', { taskId: params?.taskId }); refuse(); }
  async deleteTaskPushNotificationConfig(params) {
    record('push_config.delete', { taskId: params?.taskId, configId: params?.id ?? params?.pushNotificationConfigId });
    refuse();
  }
  async getAuthenticatedExtendedAgentCard() { record('card.extended', {}); refuse(); }
}

const card = {
  name: 'differential-witness',
  description: 'Records what the SDK would act on; executes nothing.',
  supportedInterfaces: [],
  version: '1.0.0',
  capabilities: { streaming: true, pushNotifications: true, extendedAgentCard: true, extensions: [] },
  securitySchemes: {},
  securityRequirements: [],
  defaultInputModes: ['text/plain', 'application/json'],
  defaultOutputModes: ['text/plain', 'application/json'],
  skills: [],
  signatures: [],
};

const handler = new Witness(card, new InMemoryTaskStore(), { execute: async () => {}, cancelTask: async () => {} });
const userBuilder = UserBuilder.noAuthentication;
const legacyCompat = { enabled: true };

const app = express();
app.get('/_diff/records', (_req, res) => res.json(records));
app.delete('/_diff/records', (_req, res) => { records = {}; res.status(204).end(); });
app.use((req, _res, next) => store.run(req.get('X-Diff-Case') ?? undefined, next));
app.use(`/${AGENT_CARD_PATH}`, agentCardHandler({ agentCardProvider: async () => card }));
app.post('/', jsonRpcHandler({ requestHandler: handler, userBuilder, legacyCompat }));
app.use(restHandler({ requestHandler: handler, userBuilder, legacyCompat }));

serve(app, {
  port: args.port, ignoreStdin: args['ignore-stdin'], name: 'differential.mjs',
  ready: (port) => {
    const base = `http://127.0.0.1:${port}`;
    card.supportedInterfaces.push(
      { url: `${base}/`, protocolBinding: 'JSONRPC', tenant: '', protocolVersion: '1.0' },
      { url: base, protocolBinding: 'HTTP+JSON', tenant: '', protocolVersion: '1.0' },
      { url: `${base}/`, protocolBinding: 'JSONRPC', tenant: '', protocolVersion: '0.3' },
      { url: base, protocolBinding: 'HTTP+JSON', tenant: '', protocolVersion: '0.3' },
    );
  },
});
