// The real @a2a-js/sdk 1.3.0 client over gRPC (A2A 1.0, lf.a2a.v1) driving
// writ's gRPC door, for writ's tests.
//
//   node grpc-client.mjs --addr 127.0.0.1:PORT --token JWT --scenario NAME
//                        [--task ID] [--push-url URL --push-token T] [--timeout MS]
//
// The client is the SDK's ClientFactory with its GrpcTransportFactory (h2c),
// made from a card that lists --addr as the agent's GRPC interface; every
// call carries `authorization: Bearer <token>` (a service parameter: gRPC
// metadata) beside the `a2a-version: 1.0` the SDK sets itself. Every request
// names its tenant ('' : none): the SDK's encoder sends a missing one as the
// string "undefined", a tenant writ (rightly) refuses.
//
// Scenarios:
//   clarify  SendMessage (with a push config when --push-url is set), GetTask,
//            the push-config calls (when --push-url is set), the reply on the same
//            task ("UAE"), then CancelTask of the completed task (its error is
//            expected: exit stays 0).
//   stream   SendStreamingMessage; every event.
//   get      GetTask --task, CancelTask --task, SubscribeToTask --task (another
//            caller's task: each error is expected, exit stays 0).
//   send     one SendMessage (a refusal is printed, exit 1).
//
// Output: one JSON object per line, each with "op":
//   {"op":..,"kind":"task"|"message"|"status-update"|"artifact-update"|"push-config",
//    "state":..,"taskId":..,"contextId":..,"text":..,"url":..}
//   {"op":..,"error":{"code":<gRPC status code>,"name":..,"message":..,"reasons":[..]}}

import { parseArgs } from 'node:util';
import * as grpc from '@grpc/grpc-js';
import { BinaryReader } from '@bufbuild/protobuf/wire';
import { AgentCard } from '@a2a-js/sdk';
import { ClientFactory } from '@a2a-js/sdk/client';
import { GrpcTransportFactory } from '@a2a-js/sdk/client/grpc';
import { dataPart, shortState, textOf, textPart, userMessage } from './a2a-values.mjs';

const { values: args } = parseArgs({
  options: {
    addr: { type: 'string' },
    token: { type: 'string', default: '' },
    scenario: { type: 'string', default: 'clarify' },
    task: { type: 'string', default: '' },
    'push-url': { type: 'string', default: '' },
    'push-token': { type: 'string', default: '' },
    timeout: { type: 'string', default: '20000' },
  },
});
if (!args.addr || !['clarify', 'stream', 'get', 'send'].includes(args.scenario)) {
  console.error('usage: node grpc-client.mjs --addr HOST:PORT --token JWT --scenario clarify|stream|get|send');
  process.exit(3);
}
setTimeout(() => { emit({ op: 'timeout' }); process.exit(2); }, Number.parseInt(args.timeout, 10)).unref();

function emit(obj) {
  process.stdout.write(`${JSON.stringify(obj)}\n`);
}

// reasons are the ErrorInfo reasons of a status's details (google.rpc.Status:
// 3 = details, each an Any: 1 = type_url, 2 = value; ErrorInfo: 1 = reason).
function reasons(bin) {
  const out = [];
  if (!bin) return out;
  const r = new BinaryReader(new Uint8Array(bin));
  while (r.pos < r.len) {
    const [field, wt] = r.tag();
    if (field !== 3) { r.skip(wt); continue; }
    const any = new BinaryReader(r.bytes());
    let type = '', value;
    while (any.pos < any.len) {
      const [f, w] = any.tag();
      if (f === 1) type = any.string(); else if (f === 2) value = any.bytes(); else any.skip(w);
    }
    if (!type.endsWith('google.rpc.ErrorInfo') || !value) continue;
    const info = new BinaryReader(value);
    while (info.pos < info.len) {
      const [f, w] = info.tag();
      if (f === 1) out.push(info.string()); else info.skip(w);
    }
  }
  return out;
}

function errorLine(op, err) {
  return { op, error: { code: err?.status ?? err?.cause?.code ?? null, name: err?.name ?? '', message: String(err?.message ?? err),
    reasons: reasons(err?.statusDetailsBin) } };
}

// describe is one answer or stream event as a line: a {payload} union
// (SendMessageResponse, StreamResponse), else a Task.
function describe(op, r) {
  const payload = r?.payload ?? { $case: 'task', value: r };
  const { $case: c, value: v } = payload;
  switch (c) {
    case 'task':
      return { op, kind: 'task', state: shortState(v?.status?.state ?? 0), taskId: v?.id, contextId: v?.contextId, text: textOf(v?.status?.message) };
    case 'statusUpdate':
      return { op, kind: 'status-update', state: shortState(v.status?.state ?? 0), taskId: v.taskId, contextId: v.contextId, text: textOf(v.status?.message) };
    case 'artifactUpdate':
      return { op, kind: 'artifact-update', taskId: v.taskId, contextId: v.contextId };
    default:
      return { op, kind: 'message', taskId: v?.taskId, text: textOf(v) };
  }
}

const card = AgentCard.fromJSON({
  name: 'agent', description: 'through writ', version: '1.0.0',
  supportedInterfaces: [{ url: args.addr, protocolBinding: 'GRPC', protocolVersion: '1.0' }],
  capabilities: { streaming: true, pushNotifications: true }, defaultInputModes: ['text/plain'], defaultOutputModes: ['text/plain'], skills: [],
});
const client = await new ClientFactory({
  transports: [new GrpcTransportFactory({ grpcChannelCredentials: grpc.credentials.createInsecure() })],
  preferredTransports: ['GRPC'],
}).createFromAgentCard(card);
const opts = { serviceParameters: args.token ? { authorization: `Bearer ${args.token}` } : {} };
const message = (text, extra) => userMessage([textPart(text), dataPart({ beneficiary: 'Acme Trading FZE' })], extra);

async function run(op, f) {
  try {
    const out = await f();
    emit(describe(op, out));
    return out;
  } catch (err) {
    emit(errorLine(op, err));
    return undefined;
  }
}

let failed = false;
if (args.scenario === 'send') {
  const r = await run('send', () => client.sendMessage({ tenant: '', message: message('Screen this entity') }, opts));
  failed = r === undefined;
} else if (args.scenario === 'clarify') {
  const push = args['push-url'] ? { configuration: { taskPushNotificationConfig: {
    tenant: '', id: 'cfg-1', taskId: '', url: args['push-url'], token: args['push-token'], authentication: undefined },
    acceptedOutputModes: [], returnImmediately: false } } : {};
  const sent = await run('send', () => client.sendMessage({ tenant: '', message: message('Screen this entity'), ...push }, opts));
  const task = sent?.payload?.value ?? sent;
  if (!task?.id) process.exit(1);
  await run('get', () => client.getTask({ tenant: '', id: task.id }, opts));
  if (args['push-url']) {
    for (const [op, f] of [
      ['push-get', () => client.getTaskPushNotificationConfig({ tenant: '', taskId: task.id, id: 'cfg-1' }, opts)],
      ['push-list', () => client.listTaskPushNotificationConfig({ tenant: '', taskId: task.id, pageSize: 0, pageToken: '' }, opts)],
    ]) {
      try {
        const out = await f();
        const cfgs = out?.configs ?? [out];
        emit({ op, kind: 'push-config', url: cfgs.map((c) => c.url).join(','), count: cfgs.length });
      } catch (err) {
        emit(errorLine(op, err));
      }
    }
  }
  await run('reply', () => client.sendMessage({ tenant: '', message: message('UAE', { taskId: task.id, contextId: task.contextId }) }, opts));
  await run('cancel-terminal', () => client.cancelTask({ tenant: '', id: task.id, metadata: undefined }, opts));
} else if (args.scenario === 'stream') {
  try {
    for await (const ev of client.sendMessageStream({ tenant: '', message: message('Screen this entity') }, opts)) {
      emit(describe('stream', ev));
    }
  } catch (err) {
    emit(errorLine('stream', err));
    failed = true;
  }
} else {
  await run('get', () => client.getTask({ tenant: '', id: args.task }, opts));
  await run('cancel', () => client.cancelTask({ tenant: '', id: args.task, metadata: undefined }, opts));
  try {
    for await (const ev of client.resubscribeTask({ tenant: '', id: args.task }, opts)) emit(describe('subscribe', ev));
  } catch (err) {
    emit(errorLine('subscribe', err));
  }
}
process.exit(failed ? 1 : 0);
