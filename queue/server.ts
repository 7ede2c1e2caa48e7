// Listening and stopping: bind to a host, report the URL, and on shutdown stop accepting,
// let requests in flight finish, then close idle keep-alive sockets.
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { RequestListener } from 'node:http';
import { createServer } from 'node:http';

export interface Listening {
  server: Server;
  url: string;
  close(): Promise<void>;
}

export async function listen(app: RequestListener, host: string, port: number): Promise<Listening> {
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
  const url = `http://${shownHost}:${address.port}`;
  let closing: Promise<void> | undefined;
  const close = () => {
    closing ??= new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeIdleConnections();
      // Requests still running get a moment to finish before their sockets are cut.
      const cut = setTimeout(() => server.closeAllConnections(), 2_000);
      cut.unref();
    });
    return closing;
  };
  return { server, url, close };
}

/**
 * Stops `stop()` on SIGTERM/SIGINT, exiting 0 when it is done; a second signal, or a stop
 * that hangs, exits at once (the timer is unref'd so it never keeps the process alive).
 */
export function onShutdown(stop: () => Promise<void>, log: (msg: string) => void, forceAfterMs = 10_000): void {
  let stopping = false;
  const handler = (signal: NodeJS.Signals) => {
    if (stopping) process.exit(1);
    stopping = true;
    log(`${signal} received, shutting down`);
    const force = setTimeout(() => {
      log('shutdown timed out, exiting');
      process.exit(1);
    }, forceAfterMs);
    force.unref();
    stop().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  };
  process.on('SIGTERM', handler);
  process.on('SIGINT', handler);
}
