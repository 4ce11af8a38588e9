// A real A2A 1.0 agent over gRPC (lf.a2a.v1.A2AService) on @a2a-js/sdk 1.3.0's
// server/grpc and @grpc/grpc-js, for writ's tests of its gRPC door.
//
//   node grpc-agent.mjs --agent clarifier|slow [--port 0] [--delay MS] [--ignore-stdin]
//
// Behaviours (as agent.mjs's of the same names):
//   clarifier  first message: working -> input-required "Which jurisdiction should I
//              screen against?"; a follow-up on the same task: working -> completed
//              "Screened. No matches.".
//   slow       working, then waits until cancelled (-> canceled) or --delay ms pass,
//              then completed.
// Cancelling a task that is already terminal answers TaskNotCancelable.
//
// Serves gRPC (h2c) on 127.0.0.1 at a port of its own, and HTTP on --port:
//   GET /_writ/grpc      {"port": <the gRPC port>}
//   GET /_writ/requests  the calls received so far: {method (the full gRPC method),
//                        header (metadata: key -> [values]), caller (writ-caller),
//                        body (the request message, as the SDK decoded it, JSON)}
// Prints exactly one line, `READY <http port>`, once both listen (serve.mjs).

import { parseArgs } from 'node:util';
import * as grpc from '@grpc/grpc-js';
import { AgentCard, TaskState } from '@a2a-js/sdk';
import { InMemoryTaskStore } from '@a2a-js/sdk/server';
import { A2AService, grpcService, UserBuilder } from '@a2a-js/sdk/server/grpc';
import { Executor, StrictCancelHandler } from './agent-base.mjs';
import { serve } from './serve.mjs';

console.log = console.info = (...a) => console.error(...a);

const { values: args } = parseArgs({
  options: {
    agent: { type: 'string', default: 'clarifier' },
    port: { type: 'string', default: '0' },
    delay: { type: 'string', default: '30000' },
    'ignore-stdin': { type: 'boolean', default: false },
  },
});
const kind = args.agent;
if (!['clarifier', 'slow'].includes(kind)) {
  console.error('grpc-agent.mjs: --agent must be clarifier or slow');
  process.exit(2);
}
const delayMs = Number.parseInt(args.delay, 10);

class GRPCExecutor extends Executor {
  async work(ctx, bus, existing) {
    const { taskId, contextId } = ctx;
    if (kind === 'slow') {
      if (await this.waitOrCancel(taskId, delayMs)) return; // cancelTask published canceled
      this.status(bus, taskId, contextId, TaskState.TASK_STATE_COMPLETED, 'Screening complete.');
    } else if (!existing) {
      this.status(bus, taskId, contextId, TaskState.TASK_STATE_INPUT_REQUIRED, 'Which jurisdiction should I screen against?');
    } else {
      this.status(bus, taskId, contextId, TaskState.TASK_STATE_COMPLETED, 'Screened. No matches.');
    }
    bus.finished();
  }
}

const card = AgentCard.fromJSON({
  name: kind, description: 'A gRPC test agent.', version: '1.0.0',
  supportedInterfaces: [{ url: '127.0.0.1:0', protocolBinding: 'GRPC', protocolVersion: '1.0' }],
  capabilities: { streaming: true, pushNotifications: false },
  defaultInputModes: ['text/plain'], defaultOutputModes: ['text/plain'],
  skills: [{ id: 'screen', name: 'Screen', description: 'Screen a counterparty', tags: ['sanctions'] }],
});
const handler = new StrictCancelHandler(card, new InMemoryTaskStore(), new GRPCExecutor());

// ---------- what reached the agent ----------
const seen = [];
const json = (v) => JSON.stringify(v, (_, x) => (typeof x === 'bigint' ? x.toString() : x instanceof Uint8Array ? Buffer.from(x).toString('base64') : x));
const impl = grpcService({ requestHandler: handler, userBuilder: UserBuilder.noAuthentication });
const recorded = {};
for (const [name, fn] of Object.entries(impl)) {
  recorded[name] = (call, callback) => {
    const header = {};
    for (const [k, v] of Object.entries(call.metadata.getMap())) header[k] = [String(v)];
    for (const k of Object.keys(header)) header[k] = call.metadata.get(k).map(String);
    seen.push({ method: A2AService[name]?.path ?? name, header, caller: header['writ-caller']?.[0] ?? '', body: json(call.request) });
    if (seen.length > 1000) seen.shift();
    return fn(call, callback);
  };
}

const server = new grpc.Server();
server.addService(A2AService, recorded);
server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (err, grpcPort) => {
  if (err) {
    console.error(`grpc-agent.mjs: ${err.message}`);
    process.exit(1);
  }
  serve((req, res) => {
    const send = (v) => { res.setHeader('Content-Type', 'application/json'); res.end(json(v)); };
    if (req.url === '/_writ/grpc') return send({ port: grpcPort });
    if (req.url === '/_writ/requests') return send(seen);
    res.statusCode = 404;
    res.end();
  }, { port: args.port, ignoreStdin: args['ignore-stdin'], name: 'grpc-agent.mjs' });
});
