// A benchmark worker process: told over IPC what to drive (the store, the queue over HTTP, or
// the whole path through the gateway), it runs timed windows of claim (+ send) + finish cycles.
import { GatewayClient } from '../gateway/client.js';
import { openQueueStore, QueueClient } from '../queue/index.js';
import type { FromWorker, ToWorker } from './fleet.js';
import { runLoops, type Cycle } from './loops.js';

const LEASE_MS = 30_000;

interface Driver {
  cycle: Cycle;
  close(): Promise<void>;
}

async function driverFor(message: Extract<ToWorker, { type: 'init' }>): Promise<Driver> {
  const owner = (loop: number) => `${message.name}-${loop}`;
  if (message.mode === 'library') {
    const store = await openQueueStore({ db: message.db });
    return {
      cycle: async (loop) => {
        const lease = await store.claim(owner(loop), LEASE_MS);
        if (!lease) return false;
        await store.finish(lease.id, { owner: lease.owner, token: lease.token }, null);
        return true;
      },
      close: () => store.close(),
    };
  }
  const queue = new QueueClient(message.queueUrl);
  const gateway = message.mode === 'e2e' ? new GatewayClient(message.gatewayUrl) : null;
  return {
    cycle: async (loop) => {
      const lease = await queue.claim(owner(loop), LEASE_MS);
      if (!lease) return false;
      await gateway?.send({ jobId: lease.id, owner: lease.owner, token: lease.token, qty: lease.qty });
      await queue.finish(lease.id, { owner: lease.owner, token: lease.token });
      return true;
    },
    close: async () => {
      queue.close();
      gateway?.close();
    },
  };
}

let driver: Driver | undefined;

function reply(message: FromWorker): void {
  process.send?.(message);
}

// The benchmark is gone (finished or interrupted): nothing more will be asked.
process.on('disconnect', () => process.exit(0));

process.on('message', (message: ToWorker) => {
  void handle(message).catch((err: unknown) =>
    reply({ type: 'failed', message: err instanceof Error ? err.message : String(err) }),
  );
});

async function handle(message: ToWorker): Promise<void> {
  switch (message.type) {
    case 'init':
      driver = await driverFor(message);
      reply({ type: 'ready' });
      return;
    case 'run': {
      if (!driver) throw new Error('run before init');
      const result = await runLoops(message.concurrency, message.windowMs, driver.cycle, message.startAt);
      reply({ type: 'done', result });
      return;
    }
    case 'stop':
      await driver?.close();
      process.disconnect();
      return;
  }
}
