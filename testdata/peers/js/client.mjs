// The real @a2a-js/sdk 1.3.0 client (A2A 1.0) driving one delegation, for writ's tests.
//
//   node client.mjs --url http://127.0.0.1:PORT --token JWT
//                   --scenario send|stream|clarify|cancel [--binding jsonrpc|rest]
//                   [--beneficiary NAME] [--timeout MS]
//                   [--push-url URL --push-token T [--push-scheme S --push-credentials C]]
//                   [--return-immediately]
//
// The card is resolved from --url (/.well-known/agent-card.json) and the client talks
// to the interface the card advertises for --binding (default jsonrpc). Every HTTP
// request, the card fetch included, carries `Authorization: Bearer <token>` (a fetch
// wrapper handed to the card resolver and the transports); the SDK adds
// `A2A-Version: 1.0` itself.
//
// Scenarios:
//   send     one blocking SendMessage (text + data {beneficiary}).
//   stream   SendStreamingMessage; every event.
//   clarify  SendMessage, then a reply on the same task ("UAE and UN lists").
//   cancel   SendStreamingMessage; at the first working event CancelTask; the rest of
//            the stream; then CancelTask again (its error is expected: exit stays 0).
//
// Output: one JSON object per line on stdout, each with "op" (send, stream, reply,
// cancel, cancel-again, card, timeout):
//   {"op":..,"kind":"task"|"message"|"status-update"|"artifact-update","state":..,
//    "taskId":..,"contextId":..,"text":..,"artifact":..,"artifacts":[..]}
//   {"op":..,"error":{"code":<JSON-RPC/A2A code or null>,"message":..,"name":..,
//    "httpStatus":<status of the most recent HTTP response or null>}}
// States are the A2A 1.0 names shortened: TASK_STATE_INPUT_REQUIRED -> input-required.
// Exit status: 0 when the scenario ran to its end, 1 after an error line, 2 on timeout,
// 3 on bad arguments.

import { parseArgs } from 'node:util';
import { A2A_ERROR_CODE } from '@a2a-js/sdk/errors';
import { part, shortState, textOf, userMessage } from './a2a-values.mjs';
import { bearerFetch, clientFactory, ERROR_CODES } from './client-base.mjs';

const { values: args } = parseArgs({
  options: {
    url: { type: 'string' },
    token: { type: 'string', default: '' },
    scenario: { type: 'string', default: 'send' },
    binding: { type: 'string', default: 'jsonrpc' },
    beneficiary: { type: 'string', default: '' },
    timeout: { type: 'string', default: '20000' },
    'push-url': { type: 'string', default: '' },
    'push-token': { type: 'string', default: '' },
    'push-scheme': { type: 'string', default: '' },
    'push-credentials': { type: 'string', default: '' },
    'return-immediately': { type: 'boolean', default: false },
  },
});

function emit(obj) {
  process.stdout.write(`${JSON.stringify(obj)}\n`);
}

if (!args.url || !['send', 'stream', 'clarify', 'cancel'].includes(args.scenario) ||
    !['jsonrpc', 'rest'].includes(args.binding)) {
  console.error('usage: node client.mjs --url URL --token JWT --scenario send|stream|clarify|cancel [--binding jsonrpc|rest]');
  process.exit(3);
}

const killer = setTimeout(() => {
  emit({ op: 'timeout', error: { code: null, message: `no result within ${args.timeout} ms`, name: 'Timeout', httpStatus: null } });
  process.exit(2);
}, Number.parseInt(args.timeout, 10));

// ---------- transport: a fetch that adds the bearer token ----------
let lastStatus = null;
const fetchImpl = bearerFetch(args.token, (status) => { lastStatus = status; });

// ---------- rendering ----------

function render(op, payload) {
  if (!payload) return { op, kind: 'empty' };
  const { $case: c, value: v } = payload;
  switch (c) {
    case 'task':
      return {
        op, kind: 'task', state: shortState(v.status?.state ?? 0), taskId: v.id, contextId: v.contextId,
        text: textOf(v.status?.message), artifacts: (v.artifacts || []).map((a) => a.name),
      };
    case 'message':
      return { op, kind: 'message', taskId: v.taskId, contextId: v.contextId, text: textOf(v) };
    case 'statusUpdate':
      return {
        op, kind: 'status-update', state: shortState(v.status?.state ?? 0), taskId: v.taskId,
        contextId: v.contextId, text: textOf(v.status?.message),
      };
    case 'artifactUpdate':
      return { op, kind: 'artifact-update', taskId: v.taskId, contextId: v.contextId, artifact: v.artifact?.name };
    default:
      return { op, kind: String(c) };
  }
}
// sendMessage answers a SendMessageResponse ({payload}); getTask/cancelTask a Task.
const renderResult = (op, r) => render(op, r?.payload ?? { $case: 'task', value: r });

const CODE_BY_NAME = {
  ...ERROR_CODES,
  ContentTypeNotSupportedError: A2A_ERROR_CODE.CONTENT_TYPE_NOT_SUPPORTED,
  InvalidAgentResponseError: A2A_ERROR_CODE.INVALID_AGENT_RESPONSE,
  ExtendedAgentCardNotConfiguredError: A2A_ERROR_CODE.EXTENDED_CARD_NOT_CONFIGURED,
  ExtensionSupportRequiredError: A2A_ERROR_CODE.EXTENSION_SUPPORT_REQUIRED,
};

function errorLine(op, e) {
  // An error inside a JSON-RPC stream arrives as a plain Error whose cause is typed.
  const isTyped = (x) => x?.envelopeCode !== undefined || CODE_BY_NAME[x?.name] !== undefined;
  const typed = !isTyped(e) && isTyped(e?.cause) ? e.cause : e;
  const code = typed?.envelopeCode ?? CODE_BY_NAME[typed?.name] ?? null;
  return {
    op,
    error: {
      code, message: String(e?.message ?? e), name: typed?.name ?? 'Error',
      httpStatus: typed?.statusCode ?? lastStatus,
    },
  };
}

// ---------- messages ----------
// --push-url (with --push-token, --push-scheme, --push-credentials) puts a push
// config in every send; --return-immediately asks not to wait for the task.
function pushConfig() {
  if (!args['push-url']) return undefined;
  const auth = args['push-scheme']
    ? { scheme: args['push-scheme'], credentials: args['push-credentials'] } : undefined;
  return { tenant: '', id: '', taskId: '', url: args['push-url'], token: args['push-token'], authentication: auth };
}
function sendParams(message) {
  return {
    tenant: '', message, metadata: undefined,
    configuration: {
      acceptedOutputModes: ['text/plain', 'application/json'], taskPushNotificationConfig: pushConfig(),
      returnImmediately: args['return-immediately'], historyLength: undefined,
    },
  };
}
function screenMessage() {
  const parts = [part({ $case: 'text', value: 'Screen the beneficiary of PMT-771' })];
  if (args.beneficiary) parts.push(part({ $case: 'data', value: { beneficiary: args.beneficiary } }));
  return userMessage(parts);
}

// ---------- scenarios ----------
async function main() {
  const factory = clientFactory(fetchImpl, args.binding);
  let client;
  try {
    client = await factory.createFromUrl(args.url);
  } catch (e) {
    emit(errorLine('card', e));
    return 1;
  }

  let op = args.scenario;
  try {
    switch (args.scenario) {
      case 'send':
        emit(renderResult('send', await client.sendMessage(sendParams(screenMessage()))));
        return 0;
      case 'stream':
        for await (const ev of client.sendMessageStream(sendParams(screenMessage()))) emit(render('stream', ev.payload));
        return 0;
      case 'clarify': {
        op = 'send';
        const first = renderResult('send', await client.sendMessage(sendParams(
          userMessage([part({ $case: 'text', value: 'Screen this entity' })]))));
        emit(first);
        op = 'reply';
        emit(renderResult('reply', await client.sendMessage(sendParams(userMessage(
          [part({ $case: 'text', value: 'UAE and UN lists' })],
          { taskId: first.taskId ?? '', contextId: first.contextId ?? '' })))));
        return 0;
      }
      case 'cancel': {
        op = 'stream';
        let taskId = '';
        let cancelled = false;
        for await (const ev of client.sendMessageStream(sendParams(screenMessage()))) {
          const line = render('stream', ev.payload);
          emit(line);
          taskId ||= line.taskId ?? '';
          if (!cancelled && line.kind === 'status-update' && line.state === 'working') {
            cancelled = true;
            op = 'cancel';
            emit(renderResult('cancel', await client.cancelTask({ tenant: '', id: taskId, metadata: undefined })));
            op = 'stream';
          }
        }
        op = 'cancel-again';
        try {
          emit(renderResult('cancel-again', await client.cancelTask({ tenant: '', id: taskId, metadata: undefined })));
        } catch (e) {
          emit(errorLine('cancel-again', e)); // expected: TaskNotCancelable
        }
        return 0;
      }
    }
  } catch (e) {
    emit(errorLine(op, e));
    return 1;
  }
  return 0;
}

main().then(
  (code) => { clearTimeout(killer); process.exit(code); },
  (e) => { emit(errorLine('internal', e)); process.exit(1); },
);
