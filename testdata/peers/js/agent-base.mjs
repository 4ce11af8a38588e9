// What writ's test agents (agent.mjs, interop-agent.mjs) share on the
// @a2a-js/sdk 1.3.0 server: a request handler with a strict cancel, and an
// executor base that opens each task and lets a waiting task be cancelled.

import { TaskState } from '@a2a-js/sdk';
import { DefaultRequestHandler, AgentEvent } from '@a2a-js/sdk/server';
import { TaskNotCancelableError } from '@a2a-js/sdk/errors';
import { TERMINAL, agentMessage, now } from './a2a-values.mjs';

// StrictCancelHandler is the SDK's handler, except that cancelling a task
// that is already terminal (canceled included) answers TaskNotCancelable
// (-32002); the stock SDK answers a repeated cancel with the task.
export class StrictCancelHandler extends DefaultRequestHandler {
  async cancelTask(params, context) {
    const task = await this.taskStore.load(params.id, context);
    if (task && TERMINAL.includes(task.status?.state)) {
      throw new TaskNotCancelableError(`Task not cancelable: ${params.id} is already terminal`);
    }
    return super.cancelTask(params, context);
  }
}

// Executor publishes a new task as submitted, then working, and hands it to
// the subclass's work(ctx, bus, existing), which publishes the rest and
// finishes the bus. A cancel publishes canceled "Screening cancelled." and
// wakes a task waiting in waitOrCancel.
export class Executor {
  contexts = new Map(); // taskId -> contextId, while the task runs
  waiting = new Map(); // taskId -> wake(), while the task waits

  status(bus, taskId, contextId, state, text) {
    bus.publish(AgentEvent.statusUpdate({
      taskId, contextId, metadata: undefined,
      status: { state, message: text ? agentMessage(taskId, contextId, text) : undefined, timestamp: now() },
    }));
  }

  // waitOrCancel resolves true when the task is cancelled, false after ms.
  waitOrCancel(taskId, ms) {
    return new Promise((resolve) => {
      const timer = setTimeout(() => { this.waiting.delete(taskId); resolve(false); }, ms);
      this.waiting.set(taskId, () => { clearTimeout(timer); resolve(true); });
    });
  }

  async execute(ctx, bus) {
    const { taskId, contextId } = ctx;
    const existing = ctx.task;
    this.contexts.set(taskId, contextId);
    try {
      if (!existing) {
        bus.publish(AgentEvent.task({
          id: taskId, contextId, artifacts: [], history: [ctx.userMessage], metadata: undefined,
          status: { state: TaskState.TASK_STATE_SUBMITTED, message: undefined, timestamp: now() },
        }));
      }
      this.status(bus, taskId, contextId, TaskState.TASK_STATE_WORKING);
      await this.work(ctx, bus, existing);
    } finally {
      this.contexts.delete(taskId);
    }
  }

  async cancelTask(taskId, bus) {
    const wake = this.waiting.get(taskId);
    this.waiting.delete(taskId);
    this.status(bus, taskId, this.contexts.get(taskId) || '', TaskState.TASK_STATE_CANCELED, 'Screening cancelled.');
    bus.finished();
    wake?.();
  }
}
