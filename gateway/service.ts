// Starting the gateway as a library: build the app, listen. `main.ts` wraps this for the
// command line; tests and embedders call it directly.
import { createGatewayApp } from './app.js';
import { GATEWAY_DEFAULTS, GATEWAY_OPTION_NAMES, type GatewayOptions } from './options.js';
import {
  checkHost,
  checkPort,
  listen,
  LISTEN_OPTION_NAMES,
  serverLimitsOf,
  type ServerLimits,
} from '../platform/listen.js';
import { checkRequiredOptions, type OptionNames } from '../platform/option-names.js';

export interface GatewayServiceOptions extends GatewayOptions, ServerLimits {
  /** Default 127.0.0.1. */
  host?: string | undefined;
  /** Default 0: a free port. */
  port?: number | undefined;
}

export interface GatewayService {
  /** `http://<host>:<port>`, without a trailing slash. */
  url: string;
  port: number;
  /** Stops accepting, lets sends in flight finish (up to their retry budget), then releases connections. */
  close(): Promise<void>;
}

const GATEWAY_SERVICE_OPTION_NAMES: OptionNames<GatewayServiceOptions> = {
  ...GATEWAY_OPTION_NAMES,
  ...LISTEN_OPTION_NAMES,
};

export async function startGateway(options: GatewayServiceOptions): Promise<GatewayService> {
  checkRequiredOptions('startGateway', options, GATEWAY_SERVICE_OPTION_NAMES);
  const port = checkPort(options.port);
  const host = checkHost(options.host);
  const app = createGatewayApp(gatewayOptionsOf(options));
  // A send in flight may be between retries; give it its whole budget before cutting it.
  const graceMs =
    (options.retryBudgetMs ?? GATEWAY_DEFAULTS.retryBudgetMs) +
    (options.queueTimeoutMs ?? GATEWAY_DEFAULTS.queueTimeoutMs);
  let listening;
  try {
    listening = await listen(app, host, port, { ...serverLimitsOf(options), graceMs });
  } catch (err) {
    app.close();
    throw err;
  }
  let closing: Promise<void> | undefined;
  return {
    url: listening.url,
    port: listening.port,
    close: () =>
      (closing ??= listening.close().then(() => {
        app.close();
      })),
  };
}

/** Only the gateway's own options of `options` (the service's hold its address and limits too). */
function gatewayOptionsOf(options: GatewayServiceOptions): GatewayOptions {
  return Object.fromEntries(
    Object.entries(options).filter(([name]) => Object.hasOwn(GATEWAY_OPTION_NAMES, name)),
  ) as unknown as GatewayOptions;
}
