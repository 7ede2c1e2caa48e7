// The gateway's public surface: rules, forwarder, app, service, client. Named exports only.
export {
  attemptTimeoutMs,
  backoffMs,
  classifyAttempt,
  describeUpstreamFailure,
  failureOf,
  qtyMismatchOf,
  shouldRetry,
  upstreamStatus,
  type AttemptClass,
  type AttemptFailure,
  type RetryDecision,
  type RetryPolicy,
  type RetryState,
} from './rules.js';
export type { Exchange } from '../platform/exchange.js';
export { GatewayError, GATEWAY_ERROR_STATUS, type GatewayErrorCode } from './errors.js';
export {
  GATEWAY_DEFAULTS,
  resolveGatewayOptions,
  type GatewayOptions,
  type ResolvedGatewayOptions,
} from './options.js';
export { createForwarder, type Forwarder, type ForwarderOptions } from './forwarder.js';
export { createGatewayApp, type GatewayApp } from './app.js';
export { startGateway, type GatewayService, type GatewayServiceOptions } from './service.js';
export { GatewayClient, type GatewayClientOptions } from './client.js';
export type { SendOutcome, SendRequest } from './types.js';
