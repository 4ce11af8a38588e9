// A minimal A2A agent on @a2a-js/sdk 1.3.0, to put writ in front of
// (docs/walkthrough.md). One skill, "echo": every text message becomes a
// task that completes with the text said back.
//
//   npm ci && PORT=9000 node agent.mjs
//
// It serves A2A 1.0 (SendMessage, with the header A2A-Version: 1.0) and, with
// the SDK's legacyCompat option, A2A 0.3 (message/send, no version header).
// It takes push configs (the SDK's in-memory store and sender); behind writ
// it never sees one: writ decides each, keeps it and delivers the
// notifications itself (docs/push.md).

import express from 'express';
import { AGENT_CARD_PATH, AgentCard, Role, TaskState } from '@a2a-js/sdk';
import {
  AgentEvent, DefaultExecutionEventBusManager, DefaultPushNotificationSender,
  DefaultRequestHandler, InMemoryPushNotificationStore, InMemoryTaskStore,
} from '@a2a-js/sdk/server';
import { agentCardHandler, jsonRpcHandler, UserBuilder } from '@a2a-js/sdk/server/express';

const port = Number.parseInt(process.env.PORT || '9000', 10);
const url = `http://127.0.0.1:${port}/`;

// The SDK's types are protobuf-style: every field is present.
const text = (t) => ({ content: { $case: 'text', value: t }, metadata: undefined, filename: '', mediaType: '' });

const card = {
  name: 'echo-agent',
  description: 'Says back what it is told.',
  version: '1.0.0',
  // 1.0 first; the 0.3 interface is what legacyCompat needs the card to list.
  supportedInterfaces: [
    { url, protocolBinding: 'JSONRPC', tenant: '', protocolVersion: '1.0' },
    { url, protocolBinding: 'JSONRPC', tenant: '', protocolVersion: '0.3' },
  ],
  capabilities: { streaming: true, pushNotifications: true, extendedAgentCard: false, extensions: [] },
  securitySchemes: {}, securityRequirements: [], signatures: [],
  provider: undefined, documentationUrl: undefined, iconUrl: undefined,
  defaultInputModes: ['text/plain'], defaultOutputModes: ['text/plain'],
  skills: [{
    id: 'echo', name: 'Echo', description: 'Answers a text message with the same text.',
    tags: ['example'], examples: ['hello'], inputModes: [], outputModes: [], securityRequirements: [],
  }],
};

// The executor answers each message: a task, working, then completed with
// the reply as its status message.
const executor = {
  async execute(ctx, bus) {
    const { taskId, contextId, userMessage } = ctx;
    const said = userMessage.parts.filter((p) => p.content?.$case === 'text').map((p) => p.content.value).join(' ');
    const status = (state, message) => ({ state, message, timestamp: new Date().toISOString() });
    if (!ctx.task) {
      bus.publish(AgentEvent.task({
        id: taskId, contextId, artifacts: [], history: [userMessage], metadata: undefined,
        status: status(TaskState.TASK_STATE_SUBMITTED, undefined),
      }));
    }
    const reply = {
      messageId: crypto.randomUUID(), taskId, contextId, role: Role.ROLE_AGENT,
      parts: [text(`echo: ${said}`)], metadata: undefined, extensions: [], referenceTaskIds: [],
    };
    bus.publish(AgentEvent.statusUpdate({ taskId, contextId, metadata: undefined, status: status(TaskState.TASK_STATE_COMPLETED, reply) }));
    bus.finished();
  },
  async cancelTask(taskId, bus) {
    bus.finished();
  },
};

const pushStore = new InMemoryPushNotificationStore();
const handler = new DefaultRequestHandler(card, new InMemoryTaskStore(), executor,
  new DefaultExecutionEventBusManager(), pushStore, new DefaultPushNotificationSender(pushStore));

const app = express();
app.use(`/${AGENT_CARD_PATH}`, agentCardHandler({ agentCardProvider: async () => AgentCard.toJSON(card) }));
app.post('/', jsonRpcHandler({ requestHandler: handler, userBuilder: UserBuilder.noAuthentication, legacyCompat: { enabled: true } }));
app.listen(port, '127.0.0.1', () => console.log(`echo-agent listening on ${url}`));
