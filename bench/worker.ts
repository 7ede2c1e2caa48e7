// A benchmark worker process: told over IPC what to drive (the store, or the whole path through
// the gateway), it runs timed windows of cycles, each loop finishing the job in hand and
// claiming the next in one call, and reports what it completed and the statements it sent.
import { GatewayClient } from '../gateway/client.js';
import { openQueueStore, QueueClient } from '../queue/index.js';
import { installCounters, processCounts } from './counting.js';
import type { FromWorker, ToWorker } from './fleet.js';
import { LEASE_MS, heldLeaseCycle, storeApi } from './library.js';
import { runLoops, type Cycle } from './loops.js';

interface Driver {
  cycle: Cycle;
  close(): Promise<void>;
}

async function driverFor(message: Extract<ToWorker, { type: 'init' }>): Promise<Driver> {
  const owner = (loop: number) => `${message.name}-${loop}`;
  if (message.mode === 'library') {
    const store = await openQueueStore({ db: message.db });
    return { cycle: heldLeaseCycle(storeApi(store), owner), close: () => store.close() };
  }
  const queue = new QueueClient(message.queueUrl);
  const gateway = new GatewayClient(message.gatewayUrl);
  const cycle = heldLeaseCycle(
    {
      claim: async (who) => (await queue.claimMany(who, { max: 1, leaseMs: LEASE_MS }))[0] ?? null,
      finishAndClaim: async (lease) =>
        (await queue.finishAndClaim(lease.id, { owner: lease.owner, token: lease.token })).next,
    },
    owner,
    (lease) => gateway.send({ jobId: lease.id, owner: lease.owner, token: lease.token, qty: lease.qty }),
  );
  return {
    cycle,
    close: async () => {
      queue.close();
      gateway.close();
    },
  };
}

let driver: Driver | undefined;

function reply(message: FromWorker): void {
  process.send?.(message);
}

installCounters();

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
      const before = processCounts();
      const result = await runLoops(message.concurrency, message.windowMs, driver.cycle, message.startAt);
      const after = processCounts();
      reply({
        type: 'done',
        result: { ...result, statements: after.statements - before.statements, cpuMs: after.cpuMs - before.cpuMs },
      });
      return;
    }
    case 'stop':
      await driver?.close();
      process.disconnect();
      return;
  }
}
