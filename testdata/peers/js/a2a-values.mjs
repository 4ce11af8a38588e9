// The A2A 1.0 values writ's test peers build and read, shaped as the
// @a2a-js/sdk 1.3.0 types want them (protobuf-style: every field present).

import { Role, TaskState, taskStateToJSON } from '@a2a-js/sdk';

// TERMINAL are the states a task never leaves.
export const TERMINAL = [
  TaskState.TASK_STATE_COMPLETED, TaskState.TASK_STATE_FAILED,
  TaskState.TASK_STATE_CANCELED, TaskState.TASK_STATE_REJECTED,
];

export const part = (content) => ({ content, metadata: undefined, filename: '', mediaType: '' });
export const textPart = (t) => part({ $case: 'text', value: t });
export const dataPart = (d) => part({ $case: 'data', value: d });
export const now = () => new Date().toISOString();

// textOf joins a message's text parts.
export const textOf = (m) => (m?.parts || []).filter((p) => p.content?.$case === 'text').map((p) => p.content.value).join(' ');

// shortState is the A2A 1.0 state name shortened: TASK_STATE_INPUT_REQUIRED -> input-required.
export const shortState = (s) => taskStateToJSON(s).replace(/^TASK_STATE_/, '').toLowerCase().replaceAll('_', '-');

// agentMessage is the agent's text message on a task.
export function agentMessage(taskId, contextId, text) {
  return {
    messageId: `agent-${crypto.randomUUID()}`, contextId, taskId, role: Role.ROLE_AGENT,
    parts: [textPart(text)], metadata: undefined, extensions: [], referenceTaskIds: [],
  };
}

// userMessage is a new user message of parts; extra sets its task and context.
export function userMessage(parts, extra = {}) {
  return {
    messageId: crypto.randomUUID(), contextId: '', taskId: '', role: Role.ROLE_USER, parts,
    metadata: undefined, extensions: [], referenceTaskIds: [], ...extra,
  };
}
