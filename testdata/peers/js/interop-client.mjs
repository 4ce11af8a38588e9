// The @a2a-js/sdk 1.3.0 client of writ's interop matrix (internal/interop):
// every operation the matrix covers, through the SDK's own client calls,
// unchanged (the SDK decodes and checks every answer itself).
//
//   node interop-client.mjs --url URL --token JWT [--binding jsonrpc|rest] [--legacy]
//                           [--ops send,stream,get,list,cancel,subscribe,push]
//                           [--slow-url URL] [--push-url URL --push-token T] [--timeout MS]
//
// The card is resolved from --url and the client talks to the interface it
// advertises for --binding. --legacy turns on the SDK's legacyCompat layer
// (card resolver and transports), which a 0.3 agent needs. Every request
// carries `Authorization: Bearer <token>`. --slow-url names a second agent for
// cancel and subscribe (default --url: the message text asks for a slow task).
//
// Operations, in this order (each only when named in --ops):
//   send       sendMessage "Screen ..." (blocking) -> the task
//   stream     sendMessageStream -> every event
//   get        getTask of the send's task
//   list       listTasks -> the ids listed
//   cancel     sendMessage "slow ..." (returnImmediately), then
//   subscribe  resubscribeTask on it (first event awaited), then cancelTask;
//              the subscription runs to its end
//   push       sendMessage with a push config (--push-url, --push-token), then
//              create/get/list/delete a second config on that task
// Output: one JSON line per operation on stdout:
//   {"op", "taskId", "state", "states": [...], "kinds": [...], "ids": [...], ...}
//   or {"op", "error": {"code", "message", "name"}}.
// Exit status 0 when every operation ran (errors included), 2 on timeout, 3 on
// bad arguments.

import { parseArgs } from 'node:util';
import { part, shortState, userMessage } from './a2a-values.mjs';
import { bearerFetch, clientFactory, ERROR_CODES as CODE_BY_NAME } from './client-base.mjs';

const { values: args } = parseArgs({
  options: {
    url: { type: 'string' },
    token: { type: 'string', default: '' },
    binding: { type: 'string', default: 'jsonrpc' },
    legacy: { type: 'boolean', default: false },
    ops: { type: 'string', default: 'send,stream,get,list,cancel,subscribe,push' },
    'slow-url': { type: 'string', default: '' },
    'push-url': { type: 'string', default: '' },
    'push-token': { type: 'string', default: '' },
    timeout: { type: 'string', default: '30000' },
  },
});
const emit = (o) => process.stdout.write(`${JSON.stringify(o)}\n`);
if (!args.url || !['jsonrpc', 'rest'].includes(args.binding)) {
  console.error('usage: node interop-client.mjs --url URL --token JWT [--binding jsonrpc|rest] [--legacy] [--ops ...]');
  process.exit(3);
}
const ops = new Set(args.ops.split(',').filter(Boolean));
const killer = setTimeout(() => { emit({ op: 'timeout', error: { message: `no end within ${args.timeout} ms` } }); process.exit(2); },
  Number.parseInt(args.timeout, 10));

const fetchImpl = bearerFetch(args.token);

function errorLine(op, e) {
  const typed = e?.cause && CODE_BY_NAME[e.cause?.name] !== undefined ? e.cause : e;
  return { op, error: { code: typed?.envelopeCode ?? CODE_BY_NAME[typed?.name] ?? null, message: String(e?.message ?? e), name: typed?.name ?? 'Error' } };
}

// One event or result, flattened: its kind, task id and state.
function flat(payload) {
  if (!payload) return { kind: 'empty' };
  const { $case: c, value: v } = payload;
  switch (c) {
    case 'task': return { kind: 'task', taskId: v.id, contextId: v.contextId, state: shortState(v.status?.state ?? 0), artifacts: (v.artifacts || []).map((a) => a.name) };
    case 'message': return { kind: 'message', taskId: v.taskId };
    case 'statusUpdate': return { kind: 'status-update', taskId: v.taskId, state: shortState(v.status?.state ?? 0) };
    case 'artifactUpdate': return { kind: 'artifact-update', taskId: v.taskId, artifact: v.artifact?.name };
    default: return { kind: String(c) };
  }
}
const taskOf = (t) => flat({ $case: 'task', value: t });
// sendMessage answers either {payload} or the Task (or Message) itself.
const result = (r) => (r?.payload ? flat(r.payload) : r?.role !== undefined ? flat({ $case: 'message', value: r }) : taskOf(r));

function message(text) {
  return userMessage([part({ $case: 'text', value: text }), part({ $case: 'data', value: { beneficiary: 'Acme Trading FZE' } })]);
}
function pushConfig(id = '') {
  return { tenant: '', id, taskId: '', url: args['push-url'], token: args['push-token'], authentication: undefined };
}
function params(text, { immediate = false, push = false } = {}) {
  return {
    tenant: '', message: message(text), metadata: undefined,
    configuration: {
      acceptedOutputModes: ['text/plain', 'application/json'], historyLength: undefined,
      taskPushNotificationConfig: push ? pushConfig() : undefined, returnImmediately: immediate,
    },
  };
}

async function step(op, fn) {
  if (!ops.has(op)) return undefined;
  try {
    const out = await fn();
    emit({ op, ...out });
    return out;
  } catch (e) {
    emit(errorLine(op, e));
    return undefined;
  }
}

async function main() {
  const legacyCompat = args.legacy ? { enabled: true } : undefined;
  const factory = clientFactory(fetchImpl, args.binding, legacyCompat);
  let client;
  try {
    client = await factory.createFromUrl(args.url);
  } catch (e) {
    emit(errorLine('card', e));
    return;
  }

  const sent = await step('send', async () => result(await client.sendMessage(params('Screen the beneficiary of PMT-771'))));
  await step('stream', async () => {
    const evs = [];
    for await (const ev of client.sendMessageStream(params('Screen the beneficiary of PMT-772'))) evs.push(flat(ev.payload));
    return { taskId: evs.find((e) => e.taskId)?.taskId, kinds: evs.map((e) => e.kind), states: evs.filter((e) => e.state).map((e) => e.state) };
  });
  await step('get', async () => taskOf(await client.getTask({ tenant: '', id: sent?.taskId ?? 'no-task', historyLength: undefined })));
  await step('list', async () => {
    const r = await client.listTasks({ tenant: '', contextId: '', status: 0, pageSize: 100, pageToken: '', historyLength: undefined, statusTimestampAfter: undefined, includeArtifacts: false });
    return { ids: (r.tasks || []).map((t) => t.id), totalSize: r.totalSize };
  });

  if (ops.has('cancel') || ops.has('subscribe')) {
    let slow;
    let slowClient = client;
    try {
      if (args['slow-url']) slowClient = await factory.createFromUrl(args['slow-url']);
      slow = result(await slowClient.sendMessage(params('slow screening, cancel me', { immediate: true })));
    } catch (e) {
      emit(errorLine('cancel', e));
      emit(errorLine('subscribe', e));
      slow = undefined;
    }
    if (slow?.taskId) {
      const id = slow.taskId;
      let first;
      const firstSeen = new Promise((resolve) => { first = resolve; });
      const sub = ops.has('subscribe') ? (async () => {
        const evs = [];
        try {
          for await (const ev of slowClient.resubscribeTask({ tenant: '', id })) {
            evs.push(flat(ev.payload));
            first();
          }
          return { op: 'subscribe', taskId: id, kinds: evs.map((e) => e.kind), states: evs.filter((e) => e.state).map((e) => e.state) };
        } catch (e) {
          first();
          return errorLine('subscribe', e);
        }
      })() : Promise.resolve(undefined);
      if (ops.has('subscribe')) await Promise.race([firstSeen, new Promise((r) => setTimeout(r, 5000))]);
      if (ops.has('cancel')) {
        await step('cancel', async () => ({ ...taskOf(await slowClient.cancelTask({ tenant: '', id, metadata: undefined })), before: slow.state }));
      }
      const s = await sub;
      if (s) emit(s);
    }
  }

  await step('push', async () => {
    const t = result(await client.sendMessage(params('Screen with a callback', { push: true })));
    const set = await client.createTaskPushNotificationConfig({ ...pushConfig('cfg-interop'), taskId: t.taskId });
    const got = await client.getTaskPushNotificationConfig({ tenant: '', taskId: t.taskId, id: set.id });
    const listed = await client.listTaskPushNotificationConfig({ tenant: '', taskId: t.taskId, pageSize: 10, pageToken: '' });
    await client.deleteTaskPushNotificationConfig({ tenant: '', taskId: t.taskId, id: set.id });
    const after = await client.listTaskPushNotificationConfig({ tenant: '', taskId: t.taskId, pageSize: 10, pageToken: '' });
    return {
      taskId: t.taskId, state: t.state, setId: set.id, gotUrl: got.url,
      listed: (listed.configs || []).length, listedAfterDelete: (after.configs || []).length,
    };
  });
}

main().then(
  () => { clearTimeout(killer); process.exit(0); },
  (e) => { emit(errorLine('internal', e)); process.exit(1); },
);
