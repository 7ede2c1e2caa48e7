// The three services as separate processes, started in dependency order (queue and receiver,
// then the gateway that points at both), and read back over their HTTP APIs at the end.
import { audit } from '../audit/index.js';
import { QueueClient } from '../queue/client.js';
import type { Child, ChildGroup } from './processes.js';
import type { FinalState } from './verdict.js';
import { ReceiverClient } from '../receiver/client.js';

export interface ServiceUrls {
  queue: string;
  gateway: string;
  receiver: string;
}

export interface ServiceChildren {
  queue: Child;
  gateway: Child;
  receiver: Child;
}

export interface StartServicesOptions {
  cliPath: string;
  group: ChildGroup;
  host: string;
  ports: { queue: number; gateway: number; receiver: number };
  db: { queue: string; receiver: string };
  logLevel: string;
  /** Where each service's stderr goes: a log file per service, or this process's stderr. */
  stderr(name: keyof ServiceUrls): { file: string } | 'inherit';
  /** Shared by the gateway (signs) and the receiver (checks); none: unsigned. */
  secret?: string | undefined;
  /** Required by the queue and the gateway of their callers (the gateway presents it to the queue); none: open. */
  apiKey?: string | undefined;
  /** Each service as it becomes ready. */
  onReady?(name: keyof ServiceUrls, url: string, child: Child): void;
  readyTimeoutMs?: number;
}

export async function startServiceProcesses(
  options: StartServicesOptions,
): Promise<{ urls: ServiceUrls; children: ServiceChildren }> {
  const timeoutMs = options.readyTimeoutMs ?? 20_000;
  const env = {
    ...process.env,
    ...(options.secret === undefined ? {} : { LEASEHOLD_SECRET: options.secret }),
    ...(options.apiKey === undefined ? {} : { LEASEHOLD_API_KEY: options.apiKey }),
  };
  const common = (port: number) => ['--host', options.host, '--port', String(port), '--log-level', options.logLevel];
  const start = async (name: keyof ServiceUrls, args: string[]) => {
    const child = options.group.spawn({
      name,
      cliPath: options.cliPath,
      args: [name, ...args],
      env,
      stderr: options.stderr(name),
    });
    const url = await child.waitForUrl(timeoutMs);
    options.onReady?.(name, url, child);
    return { child, url };
  };
  const [queue, receiver] = await Promise.all([
    start('queue', [...common(options.ports.queue), '--db', options.db.queue]),
    start('receiver', [...common(options.ports.receiver), '--db', options.db.receiver]),
  ]);
  const gateway = await start('gateway', [
    ...common(options.ports.gateway),
    '--queue',
    queue.url,
    '--receiver',
    receiver.url,
  ]);
  return {
    urls: { queue: queue.url, gateway: gateway.url, receiver: receiver.url },
    children: { queue: queue.child, gateway: gateway.child, receiver: receiver.child },
  };
}

/** What the queue and the receiver say at the end, from their HTTP APIs only. */
export async function readFinalState(
  urls: Pick<ServiceUrls, 'queue' | 'receiver'>,
  apiKey?: string,
): Promise<FinalState> {
  const queue = new QueueClient(urls.queue, { apiKey });
  const receiver = new ReceiverClient(urls.receiver);
  try {
    const [stats, jobs, totals, effects, journal] = await Promise.all([
      queue.stats(),
      queue.list({ limit: 1000 }),
      receiver.totals(),
      receiver.effects(),
      receiver.journal(),
    ]);
    return { stats, jobs, totals, effects, journal, audit: await audit({ queue, receiver }) };
  } finally {
    queue.close();
    receiver.close();
  }
}
