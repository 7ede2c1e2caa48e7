// Listening and stopping, for all three services: bind to a host, report the URL; on close stop
// accepting, let requests in flight finish within a grace period, then cut what is left; and in
// a command-line process, stop that way on SIGTERM/SIGINT.
import { createServer, type RequestListener, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Logger } from 'pino';

export interface Listening {
  server: Server;
  /** `http://<host>:<port>`, without a trailing slash. */
  url: string;
  port: number;
  /** Stops accepting; requests in flight get `graceMs` (default: listen's) before their sockets are cut. Safe to call twice. */
  close(graceMs?: number): Promise<void>;
}

export async function listen(app: RequestListener, host: string, port: number, graceMs = 2_000): Promise<Listening> {
  const server = createServer(app);
  // Clients keep connections alive; a short server keep-alive stops idle sockets piling up.
  server.keepAliveTimeout = 5_000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const address = server.address() as AddressInfo;
  const shownHost = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  let closing: Promise<void> | undefined;
  const close = (grace = graceMs) =>
    (closing ??= new Promise<void>((resolve) => {
      const cut = setTimeout(() => server.closeAllConnections(), grace);
      server.close(() => {
        clearTimeout(cut);
        resolve();
      });
      server.closeIdleConnections();
    }));
  return { server, url: `http://${shownHost}:${address.port}`, port: address.port, close };
}

/**
 * Runs `stop()` on SIGTERM/SIGINT and exits 0 when it is done, 1 when it fails. A second
 * signal, or a stop that outlasts `forceAfterMs`, exits 1 at once (the timer is unref'd, so it
 * never keeps the process alive).
 */
export function onShutdown(
  stop: () => Promise<void>,
  logger: Pick<Logger, 'info' | 'warn' | 'error'>,
  forceAfterMs = 10_000,
): void {
  let stopping = false;
  const handler = (signal: NodeJS.Signals) => {
    if (stopping) {
      logger.warn({ signal }, 'second signal: exiting without waiting');
      process.exit(1);
    }
    stopping = true;
    logger.info({ signal }, 'stopping');
    setTimeout(() => {
      logger.error(`did not stop within ${forceAfterMs} ms; exiting`);
      process.exit(1);
    }, forceAfterMs).unref();
    stop().then(
      () => {
        logger.info('stopped');
        process.exit(0);
      },
      (err: unknown) => {
        logger.error({ err }, 'error while stopping');
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', handler);
  process.on('SIGINT', handler);
}
