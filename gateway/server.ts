// Listening and stopping for the gateway: bind, report the URL, and on close stop accepting,
// let sends in flight finish (they may be mid-retry), then cut what is left.
import { createServer, type RequestListener, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface Listening {
  server: Server;
  url: string;
  close(): Promise<void>;
}

export async function listen(app: RequestListener, host: string, port: number, graceMs: number): Promise<Listening> {
  const server = createServer(app);
  // Workers keep connections alive; a short server keep-alive stops idle sockets piling up.
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
  const close = () =>
    (closing ??= new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeIdleConnections();
      setTimeout(() => server.closeAllConnections(), graceMs).unref();
    }));
  return { server, url: `http://${shownHost}:${address.port}`, close };
}
