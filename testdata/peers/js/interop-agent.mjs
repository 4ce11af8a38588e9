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

import { parseArgs } from 'node:util';
import express from 'express';
import { AgentCard, AGENT_CARD_PATH, TaskState } from '@a2a-js/sdk';
import { InMemoryTaskStore, AgentEvent } from '@a2a-js/sdk/server';
import { agentCardHandler, jsonRpcHandler, restHandler, UserBuilder } from '@a2a-js/sdk/server/express';
import { dataPart, textOf, textPart } from './a2a-values.mjs';
import { Executor, StrictCancelHandler } from './agent-base.mjs';
import { serve } from './serve.mjs';

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

class InteropExecutor extends Executor {
  async work(ctx, bus) {
    const { taskId, contextId } = ctx;
    if (textOf(ctx.userMessage).includes('slow')) {
      if (await this.waitOrCancel(taskId, delayMs)) return; // cancelTask published canceled and finished the bus
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

const handler = new StrictCancelHandler(card, new InMemoryTaskStore(), new InteropExecutor());
const userBuilder = UserBuilder.noAuthentication;
const legacyCompat = { enabled: true };
const app = express();
app.use(`/${AGENT_CARD_PATH}`, agentCardHandler({ agentCardProvider: async () => AgentCard.toJSON(card) }));
app.post('/', jsonRpcHandler({ requestHandler: handler, userBuilder, legacyCompat }));
app.use(restHandler({ requestHandler: handler, userBuilder, legacyCompat }));

serve(app, {
  port: args.port, ignoreStdin: args['ignore-stdin'], name: 'interop-agent.mjs',
  ready: (port) => {
    const base = `http://127.0.0.1:${port}`;
    card.supportedInterfaces.push(
      { url: `${base}/`, protocolBinding: 'JSONRPC', tenant: '', protocolVersion: '1.0' },
      { url: base, protocolBinding: 'HTTP+JSON', tenant: '', protocolVersion: '1.0' },
      { url: `${base}/`, protocolBinding: 'JSONRPC', tenant: '', protocolVersion: '0.3' },
    );
  },
});
