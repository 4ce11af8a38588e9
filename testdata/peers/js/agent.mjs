// A real A2A 1.0 agent on @a2a-js/sdk 1.3.0, for writ's tests.
//
//   node agent.mjs --agent sanctions|clarifier|slow|librarian|delegator [--port 0] [--card-url URL]
//                  [--delay MS] [--ignore-stdin] [--sign [--jku URL]] [--egress URL --delegate-to NAME]
//
// Behaviours (the seed's worked example; the Go twins are in internal/seedagents):
//   sanctions  working -> artifact "sanctions-screening" (text "<beneficiary>: 1 possible
//              match (score 0.83) against SDN list" + data {matches, top_score, list,
//              recommendation}) -> completed "Screening complete.". The beneficiary comes
//              from a data part {"beneficiary": ...}, default "Acme Trading FZE".
//   clarifier  first message: working -> input-required "Which jurisdiction should I
//              screen against?"; a follow-up on the same task: working -> completed
//              "Screened. No matches.".
//   slow       working, then waits until cancelled (-> canceled) or --delay ms
//              (default 30000) pass, then screens as sanctions does.
//   librarian  answers from the tasks the message references, as the SDK's
//              DefaultRequestHandler loaded them into the request context
//              (referenceTaskIds): completed with the text "referenced: " and,
//              for each task it loaded, `<id>[<the text of its history and
//              artifacts>]`, or "none". What it was given is what it tells.
//   delegator  delegates onward through its writ's egress listener (docs/egress.md): for
//              each message it sends the same text to --delegate-to NAME at
//              --egress URL/to/NAME (NAME a card's URL: at URL/card/{NAME, escaped}; the
//              card resolved there, then SendMessage; A2A 0.3
//              targets too, through the SDK's legacyCompat), passing the Writ-Decision-Id
//              writ gave the inbound request as Writ-Parent on every call of the SDK
//              client (its fetch). working -> completed "delegated to NAME: <state>
//              <the target's last status text>", or failed "delegation refused: <the
//              SDK's error> [<writ's reasons in the refused answer>]" when the call is
//              refused.
// Cancelling a task that is already terminal (canceled included) answers
// TaskNotCancelable (-32002); the stock SDK answers a repeated cancel with the task.
//
// Serves JSON-RPC at POST /, HTTP+JSON (REST) at the 1.0 paths (/message:send, ...),
// the card at /.well-known/agent-card.json (its interfaces advertise --card-url, by
// default this server), and GET /_writ/requests: the requests received so far (the
// last 1000; {method, path, header, caller, callerAgentId, taskId, tenant}; tenant
// is the one the SDK handed the request handler: params.tenant, else the call
// context's). legacyCompat is off: requests without `A2A-Version: 1.0` are
// refused with -32009.
//
// --sign signs the card with the SDK's own generateAgentCardSignature (ES256, a key
// generated at start, protected header {alg, kid, typ: JOSE, jku}) and serves the
// key's JWKS at GET /jwks.json; the jku is --jku, by default that JWKS.
//
// Binds 127.0.0.1 only. Prints exactly one line, `READY <port>`, to stdout once
// listening. Exits on SIGTERM/SIGINT, and when stdin closes (so a test that dies does
// not leak it) unless --ignore-stdin is given.

import { AsyncLocalStorage } from 'node:async_hooks';
import { generateKeyPairSync } from 'node:crypto';
import { parseArgs } from 'node:util';
import express from 'express';
import { AgentCard, AGENT_CARD_PATH, TaskState, generateAgentCardSignature } from '@a2a-js/sdk';
import { InMemoryTaskStore, AgentEvent } from '@a2a-js/sdk/server';
import { agentCardHandler, jsonRpcHandler, restHandler, UserBuilder } from '@a2a-js/sdk/server/express';
import { dataPart, shortState, textOf, textPart, userMessage } from './a2a-values.mjs';
import { Executor, StrictCancelHandler } from './agent-base.mjs';
import { clientFactory } from './client-base.mjs';
import { serve } from './serve.mjs';

// stdout carries the READY line only: anything the SDK logs goes to stderr.
console.log = console.info = (...a) => console.error(...a);

const { values: args } = parseArgs({
  options: {
    agent: { type: 'string', default: 'sanctions' },
    port: { type: 'string', default: '0' },
    'card-url': { type: 'string', default: '' },
    delay: { type: 'string', default: '30000' },
    egress: { type: 'string', default: '' },
    'delegate-to': { type: 'string', default: '' },
    'ignore-stdin': { type: 'boolean', default: false },
    sign: { type: 'boolean', default: false },
    jku: { type: 'string', default: '' },
  },
});

const AGENTS = {
  sanctions: { name: 'sanctions-screening-agent', description: 'Screens counterparties against sanctions and watch lists.' },
  clarifier: { name: 'clarifier', description: 'Screens counterparties against sanctions lists; asks which jurisdiction first.' },
  slow: { name: 'slow', description: 'Screens counterparties slowly; for cancellation and deadline tests.' },
  librarian: { name: 'librarian', description: 'Answers from the tasks a message references.' },
  delegator: { name: 'delegator', description: 'Delegates each message onward through its writ\'s egress listener.' },
};
const kind = args.agent;
if (!AGENTS[kind]) {
  console.error(`agent.mjs: --agent must be one of ${Object.keys(AGENTS).join(', ')}`);
  process.exit(2);
}
const delayMs = Number.parseInt(args.delay, 10);
if (kind === 'delegator' && (!args.egress || !args['delegate-to'])) {
  console.error('agent.mjs: --agent delegator needs --egress URL and --delegate-to NAME');
  process.exit(2);
}

const DEFAULT_BENEFICIARY = 'Acme Trading FZE';
const SCREENING_DONE = 'Screening complete.';
const CLARIFY_QUESTION = 'Which jurisdiction should I screen against?';
const CLARIFY_DONE = 'Screened. No matches.';

function beneficiary(msg) {
  for (const p of msg?.parts || []) {
    const b = p.content?.$case === 'data' ? p.content.value?.beneficiary : undefined;
    if (typeof b === 'string' && b.trim() !== '') return b;
  }
  return DEFAULT_BENEFICIARY;
}

// writReasons are the reasons writ put in an error answer (the ErrorInfo
// details of its domain, in any of the protocols' shapes), in order, once each.
function writReasons(body) {
  const out = [];
  const walk = (v) => {
    if (Array.isArray(v)) { v.forEach(walk); return; }
    if (v === null || typeof v !== 'object') return;
    if (v.domain === 'writ' && typeof v.reason === 'string' && !out.includes(v.reason)) out.push(v.reason);
    Object.values(v).forEach(walk);
  };
  try { walk(JSON.parse(body)); } catch { /* not JSON: no reasons */ }
  return out;
}

// ---------- executor ----------
class SeedExecutor extends Executor {
  screen(bus, taskId, contextId, msg) {
    const who = beneficiary(msg);
    bus.publish(AgentEvent.artifactUpdate({
      taskId, contextId, append: false, lastChunk: true, metadata: undefined,
      artifact: {
        artifactId: 'art-1', name: 'sanctions-screening', description: 'Screening result with match detail',
        parts: [
          textPart(`${who}: 1 possible match (score 0.83) against SDN list`),
          dataPart({ matches: 1, top_score: 0.83, list: 'SDN', recommendation: 'manual_review' }),
        ],
        metadata: undefined, extensions: [],
      },
    }));
    this.status(bus, taskId, contextId, TaskState.TASK_STATE_COMPLETED, SCREENING_DONE);
  }

  // delegate sends msg's text on to --delegate-to through the egress listener,
  // with the inbound request's decision id as Writ-Parent on every call.
  async delegate(bus, taskId, contextId, msg) {
    const target = args['delegate-to'];
    const parent = requestStore.getStore()?.decisionId || '';
    let refusal = []; // writ's codes in the last refused answer: the SDK's error does not always carry them
    const withParent = async (input, init = {}) => {
      const headers = new Headers(init.headers ?? (input instanceof Request ? input.headers : undefined));
      if (parent) headers.set('Writ-Parent', parent);
      const res = await fetch(input, { ...init, headers });
      if (!res.ok) refusal = writReasons(await res.clone().text());
      return res;
    };
    try {
      // A target named by its card's URL is called at /card/{that URL}/, else at /to/{name}/;
      // the trailing slash: the card resolves below it.
      const egress = args.egress.replace(/\/+$/, '');
      const base = /^https?:\/\//.test(target) ? `${egress}/card/${encodeURIComponent(target)}/` : `${egress}/to/${encodeURIComponent(target)}/`;
      const client = await clientFactory(withParent, 'jsonrpc', { enabled: true }).createFromUrl(base);
      const res = await client.sendMessage({ message: userMessage([textPart(textOf(msg) || 'delegated')]) });
      const task = res?.task ?? res;
      const state = task?.status?.state !== undefined ? shortState(task.status.state) : 'message';
      const said = textOf(task?.status?.message) || textOf(res?.message) || '';
      this.status(bus, taskId, contextId, TaskState.TASK_STATE_COMPLETED, `delegated to ${target}: ${state} ${said}`.trim());
    } catch (err) {
      const codes = refusal.length > 0 ? ` [${refusal.join(', ')}]` : '';
      this.status(bus, taskId, contextId, TaskState.TASK_STATE_FAILED, `delegation refused: ${err?.message ?? err}${codes}`);
    }
  }

  async work(ctx, bus, existing) {
    const { taskId, contextId } = ctx;
    if (kind === 'clarifier') {
      if (!existing) {
        this.status(bus, taskId, contextId, TaskState.TASK_STATE_INPUT_REQUIRED, CLARIFY_QUESTION);
      } else {
        this.status(bus, taskId, contextId, TaskState.TASK_STATE_COMPLETED, CLARIFY_DONE);
      }
      bus.finished();
      return;
    }
    if (kind === 'librarian') {
      const seen = (ctx.referenceTasks || []).map((t) => {
        const texts = [...(t.history || []).map(textOf), ...(t.artifacts || []).map(textOf)].filter((x) => x !== '');
        return `${t.id}[${texts.join(' | ')}]`;
      });
      this.status(bus, taskId, contextId, TaskState.TASK_STATE_COMPLETED, `referenced: ${seen.join(', ') || 'none'}`);
      bus.finished();
      return;
    }
    if (kind === 'delegator') {
      await this.delegate(bus, taskId, contextId, ctx.userMessage);
      bus.finished();
      return;
    }
    if (kind === 'slow') {
      if (await this.waitOrCancel(taskId, delayMs)) return; // cancelTask published canceled and finished the bus
    }
    this.screen(bus, taskId, contextId, ctx.userMessage);
    bus.finished();
  }
}

// ---------- what reached the agent ----------
const requestStore = new AsyncLocalStorage();
const seen = [];
const MAX_SEEN = 1000;

function record(req) {
  const header = {};
  for (let i = 0; i < req.rawHeaders.length; i += 2) {
    (header[req.rawHeaders[i]] ||= []).push(req.rawHeaders[i + 1]);
  }
  const o = { method: `${req.method} ${req.path}`, path: req.path, header, caller: req.get('Writ-Caller') || '', taskId: '', tenant: '',
    decisionId: req.get('Writ-Decision-Id') || '' };
  // The caller's agent id as this server reads it: Node decodes header bytes as
  // Latin-1, so only an ASCII header reads as writ wrote it.
  try { o.callerAgentId = JSON.parse(o.caller).agent_id ?? ''; } catch { o.callerAgentId = ''; }
  seen.push(o);
  if (seen.length > MAX_SEEN) seen.shift();
  return o;
}

const METHOD_NAMES = {
  sendMessage: 'SendMessage',
  sendMessageStream: 'SendStreamingMessage',
  getTask: 'GetTask',
  listTasks: 'ListTasks',
  cancelTask: 'CancelTask',
  resubscribe: 'SubscribeToTask',
  createTaskPushNotificationConfig: 'CreateTaskPushNotificationConfig',
  getTaskPushNotificationConfig: 'GetTaskPushNotificationConfig',
  listTaskPushNotificationConfigs: 'ListTaskPushNotificationConfigs',
  deleteTaskPushNotificationConfig: 'DeleteTaskPushNotificationConfig',
  getAuthenticatedExtendedAgentCard: 'GetExtendedAgentCard',
};

// SeedHandler is the SDK's handler with a strict cancel, and it notes each call's
// A2A method and task id on the request's record.
class SeedHandler extends StrictCancelHandler {
  async _createRequestContext(params, context) {
    const rc = await super._createRequestContext(params, context);
    const o = requestStore.getStore();
    if (o && !o.taskId) o.taskId = rc.taskId;
    return rc;
  }
}
for (const [name, rpc] of Object.entries(METHOD_NAMES)) {
  const inner = SeedHandler.prototype[name];
  if (typeof inner !== 'function') continue;
  SeedHandler.prototype[name] = function (params, context) {
    const o = requestStore.getStore();
    if (o && !o.rpc) {
      o.rpc = true;
      o.method = rpc;
      o.taskId = params?.message?.taskId || params?.taskId || params?.id || '';
      // A repeated query parameter reaches the handler as an array: shown as JSON.
      const t = params?.tenant;
      o.tenant = (typeof t === 'string' ? t : t == null ? '' : JSON.stringify(t)) || context?.tenant || '';
    }
    return inner.call(this, params, context);
  };
}

// ---------- card and server ----------
const card = {
  name: AGENTS[kind].name,
  description: AGENTS[kind].description,
  supportedInterfaces: [], // filled in once the port is known
  provider: undefined,
  version: '3.1.0',
  documentationUrl: undefined,
  capabilities: { streaming: true, pushNotifications: false, extendedAgentCard: false, extensions: [] },
  securitySchemes: {},
  securityRequirements: [],
  defaultInputModes: ['text/plain', 'application/json'],
  defaultOutputModes: ['text/plain', 'application/json'],
  skills: [{
    id: 'screen', name: 'Screen a counterparty',
    description: 'Screen a legal entity or individual against SDN, UN and local lists.',
    tags: ['sanctions', 'compliance', 'screening'], examples: ['Screen Acme Trading FZE'],
    inputModes: [], outputModes: [], securityRequirements: [],
  }],
  signatures: [],
  iconUrl: undefined,
};

// The signing key (--sign): its public half is served at /jwks.json.
const signing = args.sign ? generateKeyPairSync('ec', { namedCurve: 'P-256' }) : undefined;
const KID = 'agent-card-key-1';
const jwks = signing ? { keys: [{ ...signing.publicKey.export({ format: 'jwk' }), kid: KID, alg: 'ES256', use: 'sig' }] } : { keys: [] };
let signedCard; // a promise of the signed card, once the port is known

const handler = new SeedHandler(card, new InMemoryTaskStore(), new SeedExecutor());
const userBuilder = UserBuilder.noAuthentication;
const app = express();
app.get('/_writ/requests', (_req, res) => res.json(seen.map(({ rpc, decisionId, ...o }) => o)));
app.use((req, _res, next) => requestStore.run(record(req), next));
app.get('/jwks.json', (_req, res) => res.json(jwks));
app.use(`/${AGENT_CARD_PATH}`, agentCardHandler({
  agentCardProvider: async () => AgentCard.toJSON(signedCard ? await signedCard : card),
}));
app.post('/', jsonRpcHandler({ requestHandler: handler, userBuilder }));
app.use(restHandler({ requestHandler: handler, userBuilder }));

serve(app, {
  port: args.port, ignoreStdin: args['ignore-stdin'], name: 'agent.mjs',
  ready: (port) => {
    const base = (args['card-url'] || `http://127.0.0.1:${port}`).replace(/\/+$/, '');
    card.supportedInterfaces.push(
      { url: `${base}/`, protocolBinding: 'JSONRPC', tenant: '', protocolVersion: '1.0' },
      { url: base, protocolBinding: 'HTTP+JSON', tenant: '', protocolVersion: '1.0' },
    );
    if (signing) {
      const jku = args.jku || `http://127.0.0.1:${port}/jwks.json`;
      signedCard = generateAgentCardSignature(signing.privateKey, { alg: 'ES256', kid: KID, typ: 'JOSE', jku })(card);
    }
  },
});
