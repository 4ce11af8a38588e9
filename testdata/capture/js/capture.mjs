// Captures real A2A wire traffic between the @a2a-js/sdk client and server
// and writes one HTTP/1.1 message per file under testdata/a2a/.
//
//   node capture.mjs <out-dir>      (default: ../../a2a)
//
// Topology: client --(fetchImpl: agent.test -> 127.0.0.1:proxy)--> recording
// proxy --> express app (DefaultRequestHandler + InMemoryTaskStore). The proxy
// records the bytes it receives and the bytes the server answers. Cards
// advertise http://agent.test so that card bodies are stable; the recorded
// Host header (127.0.0.1:PORT) is rewritten to agent.test.
//
// A2A 1.0 (JSON-RPC and HTTP+JSON): pure 1.0 server, 1.0 client.
// A2A 0.3 HTTP+JSON: same SDK server with legacyCompat on (its v0.3 REST
// router), driven by the SDK's LegacyRestTransport (RestTransportFactory with
// legacyCompat on, card interface protocolVersion 0.3).

import http from 'node:http';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import express from 'express';
import { AgentCard, Role, TaskState } from '@a2a-js/sdk';
import { DefaultRequestHandler, InMemoryTaskStore, InMemoryPushNotificationStore, AgentEvent } from '@a2a-js/sdk/server';
import { agentCardHandler, jsonRpcHandler, restHandler, UserBuilder } from '@a2a-js/sdk/server/express';
import {
  ClientFactory, JsonRpcTransportFactory, RestTransportFactory, DefaultAgentCardResolver, withA2AExtensions,
} from '@a2a-js/sdk/client';

const here = path.dirname(fileURLToPath(import.meta.url));
const OUT = path.resolve(process.argv[2] || path.join(here, '..', '..', 'a2a'));
const HOST = 'agent.test';
const BASE = `http://${HOST}`;
const EXT = 'urn:writ:ext:classification:v1';
const UNKNOWN_TASK = '00000000-0000-4000-8000-000000000000';

// Hard stop: the script must never hang.
const killer = setTimeout(() => { console.error('capture.mjs: global timeout'); process.exit(3); }, 60_000);

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const now = () => new Date().toISOString();

// ---------- parts / messages (protobuf-shaped, as the SDK's TS types want) ----------
const part = (content, extra = {}) => ({ content, metadata: undefined, filename: '', mediaType: '', ...extra });
const textPart = (t) => part({ $case: 'text', value: t });
const dataPart = (d) => part({ $case: 'data', value: d });
const urlPart = (u, mediaType, filename) => part({ $case: 'url', value: u }, { mediaType, filename });

function message(id, parts, extra = {}) {
  return {
    messageId: id, contextId: '', taskId: '', role: Role.ROLE_USER, parts,
    metadata: undefined, extensions: [], referenceTaskIds: [], ...extra,
  };
}
function agentMessage(taskId, contextId, text) {
  return {
    messageId: `agent-${taskId}-${Math.random().toString(16).slice(2, 10)}`, contextId, taskId,
    role: Role.ROLE_AGENT, parts: [textPart(text)], metadata: undefined, extensions: [], referenceTaskIds: [],
  };
}
const firstText = (m) => (m?.parts || []).map((p) => (p.content?.$case === 'text' ? p.content.value : '')).join(' ');

// ---------- executor ----------
// "Screen..." -> sanctions: working -> artifact sanctions-screening -> completed.
// "Clarify..." / "Park..." -> input-required; a follow-up send completes it.
// "...slowly..." -> like sanctions but waits first (for subscribe).
class WritExecutor {
  contexts = new Map();
  status(bus, taskId, contextId, state, msg) {
    bus.publish(AgentEvent.statusUpdate({
      taskId, contextId, status: { state, message: msg, timestamp: now() }, metadata: undefined,
    }));
  }
  artifact(bus, taskId, contextId, subject) {
    bus.publish(AgentEvent.artifactUpdate({
      taskId, contextId, append: false, lastChunk: true, metadata: undefined,
      artifact: {
        artifactId: `sanctions-${taskId}`, name: 'sanctions-screening', description: 'Sanctions screening result',
        parts: [
          textPart(`No sanctions matches for ${subject}.`),
          dataPart({ beneficiary: subject, matches: 0, lists: ['OFAC-SDN', 'UN', 'EU'] }),
        ],
        metadata: undefined, extensions: [],
      },
    }));
  }
  async execute(ctx, bus) {
    const { taskId, contextId } = ctx;
    const msg = ctx.userMessage;
    const text = firstText(msg);
    this.contexts.set(taskId, contextId);
    const existing = ctx.task;
    if (!existing) {
      bus.publish(AgentEvent.task({
        id: taskId, contextId, status: { state: TaskState.TASK_STATE_SUBMITTED, message: undefined, timestamp: now() },
        artifacts: [], history: [msg], metadata: undefined,
      }));
    }
    const subject = (msg.parts || []).find((p) => p.content?.$case === 'data')?.content.value?.beneficiary || 'Acme Trading FZE';
    if (existing && existing.status?.state === TaskState.TASK_STATE_INPUT_REQUIRED) {
      this.status(bus, taskId, contextId, TaskState.TASK_STATE_WORKING);
      this.artifact(bus, taskId, contextId, subject);
      this.status(bus, taskId, contextId, TaskState.TASK_STATE_COMPLETED,
        agentMessage(taskId, contextId, `Screened ${subject} against ${text.trim()}: no matches.`));
      bus.finished();
      return;
    }
    if (text.startsWith('Clarify') || text.startsWith('Park')) {
      this.status(bus, taskId, contextId, TaskState.TASK_STATE_INPUT_REQUIRED,
        agentMessage(taskId, contextId, 'Which jurisdiction should I screen against?'));
      bus.finished();
      return;
    }
    this.status(bus, taskId, contextId, TaskState.TASK_STATE_WORKING);
    if (text.includes('slowly')) await sleep(700);
    this.artifact(bus, taskId, contextId, subject);
    this.status(bus, taskId, contextId, TaskState.TASK_STATE_COMPLETED,
      agentMessage(taskId, contextId, 'Screening complete.'));
    bus.finished();
  }
  async cancelTask(taskId, bus) {
    const contextId = this.contexts.get(taskId) || '';
    this.status(bus, taskId, contextId, TaskState.TASK_STATE_CANCELED,
      agentMessage(taskId, contextId, 'Canceled by request.'));
    bus.finished();
  }
}

// ---------- cards ----------
function makeCard({ legacy }) {
  const v = legacy ? '0.3' : '1.0';
  return {
    name: 'Sanctions Screening Agent',
    description: 'Screens counterparties against sanctions lists (Writ capture fixture agent).',
    supportedInterfaces: legacy
      ? [{ url: BASE, protocolBinding: 'HTTP+JSON', tenant: '', protocolVersion: '0.3' }]
      : [
          { url: `${BASE}/`, protocolBinding: 'JSONRPC', tenant: '', protocolVersion: v },
          { url: BASE, protocolBinding: 'HTTP+JSON', tenant: '', protocolVersion: v },
        ],
    provider: { url: 'https://bank.ae', organization: 'Writ Test Bank' },
    version: '1.0.0',
    documentationUrl: undefined,
    capabilities: {
      streaming: true, pushNotifications: true, extendedAgentCard: true,
      extensions: [{ uri: EXT, description: 'Data classification label carried in message metadata', required: false, params: undefined }],
    },
    securitySchemes: {
      bearer: { scheme: { $case: 'httpAuthSecurityScheme', value: { description: 'Bank-issued JWT', scheme: 'Bearer', bearerFormat: 'JWT' } } },
    },
    securityRequirements: [{ schemes: { bearer: { list: [] } } }],
    defaultInputModes: ['text/plain', 'application/json', 'application/pdf'],
    defaultOutputModes: ['text/plain', 'application/json'],
    skills: [{
      id: 'sanctions-screening', name: 'Sanctions screening', description: 'Screen a beneficiary against OFAC, UN and EU lists.',
      tags: ['kyc', 'sanctions'], examples: ['Screen Acme Trading FZE'], inputModes: [], outputModes: [], securityRequirements: [],
    }],
    signatures: [],
    iconUrl: undefined,
  };
}
function extendedCard(card) {
  return {
    ...card,
    description: `${card.description} Extended card for authenticated callers.`,
    skills: [...card.skills, {
      id: 'pep-screening', name: 'PEP screening', description: 'Screen for politically exposed persons.',
      tags: ['kyc', 'pep'], examples: [], inputModes: [], outputModes: [], securityRequirements: [],
    }],
  };
}

// ---------- server ----------
function startServer({ legacy }) {
  const card = makeCard({ legacy });
  const noopPushSender = { send: async () => {} }; // do not try to reach agents.bank.ae
  const handler = new DefaultRequestHandler(
    card, new InMemoryTaskStore(), new WritExecutor(), undefined,
    new InMemoryPushNotificationStore(), noopPushSender, async () => extendedCard(card),
  );
  const compat = { enabled: legacy };
  const app = express();
  app.use('/.well-known/agent-card.json', agentCardHandler({ agentCardProvider: async () => AgentCard.toJSON(card), legacyCompat: compat }));
  app.post('/', jsonRpcHandler({ requestHandler: handler, userBuilder: UserBuilder.noAuthentication, legacyCompat: compat }));
  app.use(restHandler({ requestHandler: handler, userBuilder: UserBuilder.noAuthentication, legacyCompat: compat }));
  return listen(http.createServer(app));
}

function listen(server) {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve(server));
  });
}

// ---------- recording proxy ----------
function pairs(raw) {
  const out = [];
  for (let i = 0; i < raw.length; i += 2) out.push([raw[i], raw[i + 1]]);
  return out;
}

class Recorder {
  constructor(backendPort) {
    this.backendPort = backendPort;
    this.exchanges = [];
  }
  async start() {
    this.server = await listen(http.createServer((req, res) => this.handle(req, res)));
    this.port = this.server.address().port;
    return this;
  }
  handle(req, res) {
    const ex = { req: null, res: null };
    ex.done = new Promise((r) => { ex.finish = r; });
    this.exchanges.push(ex);
    const body = [];
    req.on('data', (c) => body.push(c));
    req.on('end', () => {
      ex.req = { method: req.method, url: req.url, version: req.httpVersion, headers: pairs(req.rawHeaders), body: Buffer.concat(body) };
      const up = http.request({
        host: '127.0.0.1', port: this.backendPort, method: req.method, path: req.url, headers: req.rawHeaders,
      }, (ur) => {
        const chunks = [];
        let finished = false;
        const finalize = () => {
          if (finished) return;
          finished = true;
          ex.res = {
            version: ur.httpVersion, status: ur.statusCode, reason: ur.statusMessage,
            headers: pairs(ur.rawHeaders), body: Buffer.concat(chunks),
          };
          ex.finish();
        };
        res.writeHead(ur.statusCode, ur.statusMessage, ur.rawHeaders);
        res.flushHeaders();
        ur.on('data', (c) => { chunks.push(c); res.write(c); });
        ur.on('end', () => { res.end(); finalize(); });
        ur.on('error', () => finalize());
        ur.on('close', finalize);
        res.on('close', () => { if (!ur.complete) { up.destroy(); finalize(); } });
      });
      up.on('error', (e) => { ex.error = e; if (!res.headersSent) res.writeHead(502); res.end(); ex.finish(); });
      up.end(ex.req.body);
    });
  }
  close() { this.server.closeAllConnections?.(); this.server.close(); }
}

function headLines(headers, { isResponse, bodyLen }) {
  const lines = [];
  let chunked = false;
  let hadLength = false;
  for (const [k, v] of headers) {
    const lk = k.toLowerCase();
    if (lk === 'date') continue;
    if (lk === 'transfer-encoding') { chunked = /chunked/i.test(v); continue; }
    if (lk === 'content-length') { hadLength = true; lines.push(`${k}: ${bodyLen}`); continue; }
    if (lk === 'host') { lines.push(`${k}: ${HOST}`); continue; }
    lines.push(`${k}: ${v}`);
  }
  if (!hadLength && (chunked || bodyLen > 0)) lines.push(`Content-Length: ${bodyLen}`);
  void isResponse;
  return lines;
}

function writeExchange(dir, name, ex) {
  fs.mkdirSync(dir, { recursive: true });
  const q = ex.req;
  const reqHead = [`${q.method} ${q.url} HTTP/${q.version}`, ...headLines(q.headers, { bodyLen: q.body.length })].join('\r\n');
  fs.writeFileSync(path.join(dir, `${name}.request.http`), Buffer.concat([Buffer.from(`${reqHead}\r\n\r\n`), q.body]));
  const r = ex.res;
  const resHead = [`HTTP/${r.version} ${r.status} ${r.reason}`, ...headLines(r.headers, { isResponse: true, bodyLen: r.body.length })].join('\r\n');
  fs.writeFileSync(path.join(dir, `${name}.response.http`), Buffer.concat([Buffer.from(`${resHead}\r\n\r\n`), r.body]));
  const all = fs.readFileSync(path.join(dir, `${name}.request.http`), 'latin1') + fs.readFileSync(path.join(dir, `${name}.response.http`), 'latin1');
  if (all.includes('127.0.0.1')) throw new Error(`${name}: loopback address leaked into fixture`);
}

// ---------- driver ----------
const log = (...a) => console.log('[js]', ...a);
const written = [];

function makeSession(recorder, dir) {
  const fetchImpl = (input, init) => {
    const u = typeof input === 'string' ? input : input instanceof URL ? input.href : input.url;
    const target = u.replace(BASE, `http://127.0.0.1:${recorder.port}`);
    if (typeof input === 'string' || input instanceof URL) return fetch(target, init);
    return fetch(new Request(target, input), init);
  };
  async function capture(name, fn, { expectError = false, sub = dir } = {}) {
    const start = recorder.exchanges.length;
    let result; let error;
    try { result = await fn(); } catch (e) { error = e; }
    const exs = recorder.exchanges.slice(start);
    await Promise.race([Promise.all(exs.map((e) => e.done)), sleep(5000)]);
    if (exs.length !== 1) throw new Error(`${sub}/${name}: expected 1 HTTP exchange, saw ${exs.length} (${error || ''})`);
    if (!exs[0].res) throw new Error(`${sub}/${name}: no response recorded`);
    if (error && !expectError) throw new Error(`${sub}/${name}: unexpected error: ${error.stack || error}`);
    writeExchange(sub, name, exs[0]);
    written.push(path.relative(OUT, path.join(sub, name)));
    log(`${path.relative(OUT, sub)}/${name}: ${exs[0].req.method} ${exs[0].req.url} -> ${exs[0].res.status}${error ? ` (client error: ${error.message})` : ''}`);
    return result;
  }
  return { fetchImpl, capture };
}

async function collect(gen, limit = 50) {
  const out = [];
  for await (const ev of gen) { out.push(ev); if (out.length >= limit) break; }
  return out;
}

const taskOf = (r) => (r?.payload ? (r.payload.$case === 'task' ? r.payload.value : undefined) : r);

function sendParams(msg, configuration) {
  return { tenant: '', message: msg, configuration, metadata: undefined };
}
function config(extra = {}) {
  return { acceptedOutputModes: ['text/plain', 'application/json'], taskPushNotificationConfig: undefined, returnImmediately: false, ...extra };
}
const pushConfig = (taskId, id) => ({
  tenant: '', id, taskId, url: 'https://agents.bank.ae/cb', token: 's3cret',
  authentication: { scheme: 'Bearer', credentials: 'eyJhbGciOiJIUzI1NiJ9.e30.cGxhY2Vob2xkZXI' },
});
const screenMsg = (id) => message(id, [textPart('Screen this beneficiary against sanctions lists.'), dataPart({ beneficiary: 'Acme Trading FZE' })], {
  metadata: { [EXT]: { level: 'restricted' } },
});

async function runBinding({ client, capture, fetchImpl, rawBase, binding, version }) {
  const legacy = version === 'v0.3';
  const ext = { serviceParameters: {} };
  withA2AExtensions(EXT)(ext.serviceParameters);

  // send
  const sent = taskOf(await capture('send', () => client.sendMessage(sendParams(screenMsg(`msg-${binding}-send`), config()), ext)));
  // send_file
  await capture('send_file', () => client.sendMessage(sendParams(message(`msg-${binding}-file`, [
    textPart('Screen the holder of this passport.'),
    urlPart('https://files.bank.ae/kyc/passport.pdf', 'application/pdf', 'passport.pdf'),
  ]), config())));
  // send_push
  await capture('send_push', () => client.sendMessage(sendParams(screenMsg(`msg-${binding}-push`),
    config({ taskPushNotificationConfig: pushConfig('', 'cb-1') }))), { expectError: true });
  // send_input_required + send_reply
  const ir = taskOf(await capture('send_input_required', () => client.sendMessage(sendParams(message(`msg-${binding}-clarify`, [
    textPart('Clarify and screen this beneficiary.'), dataPart({ beneficiary: 'Acme Trading FZE' }),
  ]), config()))));
  await capture('send_reply', () => client.sendMessage(sendParams(message(`msg-${binding}-reply`, [textPart('UAE and UN lists')],
    { taskId: ir.id, contextId: ir.contextId }), config())));
  // stream
  await capture('stream', () => collect(client.sendMessageStream(sendParams(screenMsg(`msg-${binding}-stream`), config()), ext)));
  // get
  await capture('get', () => client.getTask({ tenant: '', id: sent.id, historyLength: undefined }));
  // list (1.0 only; the v0.3 compat transports have no ListTasks)
  if (!legacy) {
    await capture('list', () => client.listTasks({
      tenant: '', contextId: sent.contextId, status: TaskState.TASK_STATE_UNSPECIFIED, pageSize: 10, pageToken: '',
      historyLength: undefined, statusTimestampAfter: undefined, includeArtifacts: undefined,
    }));
  }
  // cancel (parked in input-required) and cancel_terminal (completed task)
  const parked = taskOf(await client.sendMessage(sendParams(message(`msg-${binding}-park`, [textPart('Park this screening until told.')]), config())));
  await capture('cancel', () => client.cancelTask({ tenant: '', id: parked.id, metadata: undefined }));
  // cancel_again: the canceled task once more (the SDK answers with the task,
  // not an error); cancel_terminal: the completed task (TaskNotCancelable).
  await capture('cancel_again', () => client.cancelTask({ tenant: '', id: parked.id, metadata: undefined }), { expectError: true });
  await capture('cancel_terminal', () => client.cancelTask({ tenant: '', id: sent.id, metadata: undefined }), { expectError: true });
  // get_unknown
  await capture('get_unknown', () => client.getTask({ tenant: '', id: UNKNOWN_TASK }), { expectError: true });
  // subscribe: non-blocking send of a slow task, then resubscribe while it works
  const slow = taskOf(await client.sendMessage(sendParams(message(`msg-${binding}-slow`, [
    textPart('Screen this beneficiary slowly and thoroughly.'), dataPart({ beneficiary: 'Acme Trading FZE' }),
  ]), config({ returnImmediately: true }))));
  if (!slow?.id) throw new Error('slow send returned no task');
  await capture('subscribe', () => collect(client.resubscribeTask({ tenant: '', id: slow.id }, { signal: AbortSignal.timeout(5000) })));
  // push config operations on the completed send task
  await capture('push_set', () => client.createTaskPushNotificationConfig(pushConfig(sent.id, 'cfg-1')));
  await capture('push_get', () => client.getTaskPushNotificationConfig({ tenant: '', taskId: sent.id, id: 'cfg-1' }));
  await capture('push_list', () => client.listTaskPushNotificationConfig({ tenant: '', taskId: sent.id, pageSize: 0, pageToken: '' }));
  await capture('push_delete', () => client.deleteTaskPushNotificationConfig({ tenant: '', taskId: sent.id, id: 'cfg-1' }));
  // extended card
  await capture('card_extended', () => client.getAgentCard(), { expectError: true });

  // Raw requests shaped per spec (the client has no call for these).
  if (binding === 'jsonrpc') {
    const hdrs = { 'Content-Type': 'application/json', Accept: 'application/json' };
    if (!legacy) hdrs['A2A-Version'] = '1.0';
    await capture('error_parse', () => fetchImpl(`${rawBase}/`, { method: 'POST', headers: hdrs, body: '{"jsonrpc":"2.0","method":' }).then((r) => r.text()));
    await capture('error_method', () => fetchImpl(`${rawBase}/`, {
      method: 'POST', headers: hdrs,
      body: JSON.stringify({ jsonrpc: '2.0', id: 'frob-1', method: legacy ? 'tasks/frobnicate' : 'FrobnicateTask', params: { id: sent.id } }),
    }).then((r) => r.text()));
  } else {
    const hdrs = { 'Content-Type': legacy ? 'application/json' : 'application/a2a+json' };
    if (!legacy) hdrs['A2A-Version'] = '1.0';
    await capture('error_parse', () => fetchImpl(`${rawBase}${legacy ? '/v1' : ''}/message:send`, { method: 'POST', headers: hdrs, body: '{"message":' }).then((r) => r.text()));
  }
}

async function main() {
  fs.mkdirSync(OUT, { recursive: true });

  // ---- A2A 1.0 ----
  {
    const server = await startServer({ legacy: false });
    const rec = await new Recorder(server.address().port).start();
    for (const binding of ['jsonrpc', 'rest']) {
      const dir = path.join(OUT, 'v1.0', binding);
      const { fetchImpl, capture } = makeSession(rec, dir);
      const factory = new ClientFactory({
        transports: binding === 'jsonrpc' ? [new JsonRpcTransportFactory({ fetchImpl })] : [new RestTransportFactory({ fetchImpl })],
        cardResolver: new DefaultAgentCardResolver({ fetchImpl }),
        preferredTransports: [binding === 'jsonrpc' ? 'JSONRPC' : 'HTTP+JSON'],
      });
      const client = await capture(binding === 'jsonrpc' ? 'card' : '_card', () => factory.createFromUrl(BASE),
        { sub: binding === 'jsonrpc' ? path.join(OUT, 'v1.0') : path.join(dir) });
      if (binding === 'rest') { fs.rmSync(path.join(dir, '_card.request.http')); fs.rmSync(path.join(dir, '_card.response.http')); written.pop(); }
      await runBinding({ client, capture, fetchImpl, rawBase: BASE, binding, version: 'v1.0' });
    }
    rec.close(); server.closeAllConnections(); server.close();
  }

  // ---- A2A 0.3 HTTP+JSON via the SDK's v0.3 compat layer ----
  {
    const server = await startServer({ legacy: true });
    const rec = await new Recorder(server.address().port).start();
    const dir = path.join(OUT, 'v0.3', 'rest');
    const { fetchImpl, capture } = makeSession(rec, dir);
    const factory = new ClientFactory({
      transports: [new RestTransportFactory({ fetchImpl, legacyCompat: { enabled: true } })],
      cardResolver: new DefaultAgentCardResolver({ fetchImpl, legacyCompat: { enabled: true } }),
      preferredTransports: ['HTTP+JSON'],
    });
    const client = await factory.createFromUrl(BASE);
    await runBinding({ client, capture, fetchImpl, rawBase: BASE, binding: 'rest', version: 'v0.3' });
    rec.close(); server.closeAllConnections(); server.close();
  }

  log(`wrote ${written.length} exchanges under ${OUT}`);
  clearTimeout(killer);
}

main().then(() => process.exit(0), (e) => { console.error('capture.mjs failed:', e); process.exit(1); });
