// What writ's test clients (client.mjs, interop-client.mjs) share on the
// @a2a-js/sdk 1.3.0 client: a fetch that carries the bearer token, the
// client factory, and the A2A error codes of the SDK's typed errors.

import {
  ClientFactory, DefaultAgentCardResolver, JsonRpcTransportFactory, RestTransportFactory,
} from '@a2a-js/sdk/client';
import { A2A_ERROR_CODE } from '@a2a-js/sdk/errors';

// bearerFetch is a fetch that adds `Authorization: Bearer <token>` (when
// token is set) to every request, the card fetch included; seen(status) is
// told each answer's status.
export function bearerFetch(token, seen = () => {}) {
  return async (input, init = {}) => {
    const headers = new Headers(init.headers ?? (input instanceof Request ? input.headers : undefined));
    if (token) headers.set('Authorization', `Bearer ${token}`);
    const res = await fetch(input, { ...init, headers });
    seen(res.status);
    return res;
  };
}

// clientFactory resolves cards and talks through fetchImpl, preferring the
// interface of binding (jsonrpc or rest); legacyCompat ({enabled: true})
// turns on the SDK's A2A 0.3 layer.
export function clientFactory(fetchImpl, binding, legacyCompat) {
  return new ClientFactory({
    transports: [new JsonRpcTransportFactory({ fetchImpl, legacyCompat }), new RestTransportFactory({ fetchImpl, legacyCompat })],
    cardResolver: new DefaultAgentCardResolver({ fetchImpl, legacyCompat }),
    preferredTransports: [binding === 'rest' ? 'HTTP+JSON' : 'JSONRPC'],
  });
}

// ERROR_CODES are the A2A codes of the SDK's typed errors both clients read.
export const ERROR_CODES = {
  TaskNotFoundError: A2A_ERROR_CODE.TASK_NOT_FOUND,
  TaskNotCancelableError: A2A_ERROR_CODE.TASK_NOT_CANCELABLE,
  PushNotificationNotSupportedError: A2A_ERROR_CODE.PUSH_NOTIFICATION_NOT_SUPPORTED,
  UnsupportedOperationError: A2A_ERROR_CODE.UNSUPPORTED_OPERATION,
  VersionNotSupportedError: A2A_ERROR_CODE.VERSION_NOT_SUPPORTED,
  RequestMalformedError: A2A_ERROR_CODE.INVALID_PARAMS,
};
