// Gateway overhead: the latency of one send through the gateway (verify with the queue, then
// forward to the receiver) against the same effect posted straight to the receiver, one
// request at a time, the kinds taking turns so that drift hits all alike. The lease check the
// gateway makes (POST /jobs/:id/verify on the queue) is timed on its own as well, and so is a
// bare node:http server: the floor any HTTP hop costs on this machine; and a bare gateway, the
// same verify-then-forward behind bare node:http, to tell the gateway's own code from the hops.
import { randomBytes } from 'node:crypto';
import { exchange, keepAliveAgent } from '../platform/exchange.js';
import { GatewayClient } from '../gateway/client.js';
import { QueueClient } from '../queue/client.js';
import type { Lease } from '../queue/types.js';
import { peakRssMiB, startBareFront, startEchoServer } from './processes.js';
import type { System } from './services.js';
import { percentile } from './stats.js';

export interface LatencySample {
  gatewayP50Ms: number;
  gatewayP99Ms: number;
  /** The same verify-then-forward behind a bare node:http handler (bare-front.ts). */
  bareGatewayP50Ms: number;
  bareGatewayP99Ms: number;
  directP50Ms: number;
  directP99Ms: number;
  verifyP50Ms: number;
  verifyP99Ms: number;
  floorP50Ms: number;
  floorP99Ms: number;
  samples: number;
  errors: number;
  firstError?: string;
}

export interface LatencyProbe {
  measure(round: number): Promise<LatencySample>;
  peaks(): Record<string, number | null>;
  close(): Promise<void>;
}

const OWNER = 'bench-latency';
const WARMUP = 10;
const runPrefix = randomBytes(3).toString('hex');

export async function openLatencyProbe(system: System, samples: number): Promise<LatencyProbe> {
  const echo = await startEchoServer();
  const bare = await startBareFront('bare gateway', 'gateway', [
    '--queue',
    system.queue.url,
    '--receiver',
    system.receiver.url,
  ]).catch(async (err: unknown) => {
    await echo.stop();
    throw err;
  });
  const bareGateway = new GatewayClient(bare.url);
  const echoUrl = new URL('/effects', echo.url);
  const gateway = new GatewayClient(system.gateway.url);
  const queue = new QueueClient(system.queue.url);
  const agent = keepAliveAgent();
  const effects = new URL('/effects', system.receiver.url);
  const store = system.queueDb.store;
  let warm = false;

  const direct = async (jobId: string) => {
    const body = Buffer.from(JSON.stringify({ jobId, qty: 1 }));
    const res = await exchange({
      method: 'POST',
      url: effects,
      body,
      headers: { 'fencing-token': '1' },
      timeoutMs: 10_000,
      agent,
    });
    if (res.kind !== 'response' || res.status !== 201)
      throw new Error(`direct POST /effects: ${JSON.stringify(res).slice(0, 200)}`);
  };
  const floor = async () => {
    const body = Buffer.from(JSON.stringify({ jobId: 'floor', qty: 1 }));
    const res = await exchange({
      method: 'POST',
      url: echoUrl,
      body,
      headers: { 'fencing-token': '1' },
      timeoutMs: 10_000,
      agent,
    });
    if (res.kind !== 'response' || res.status !== 200)
      throw new Error(`bare node:http: ${JSON.stringify(res).slice(0, 200)}`);
  };
  const viaGateway = (lease: Lease) =>
    gateway.send({ jobId: lease.id, owner: OWNER, token: lease.token, qty: lease.qty });
  const viaBareGateway = (lease: Lease) =>
    bareGateway.send({ jobId: lease.id, owner: OWNER, token: lease.token, qty: lease.qty });

  /** Leases for this round's sends, claimed in one transaction so setup stays cheap. */
  const claimLeases = async (count: number): Promise<Lease[]> => {
    await system.queueDb.topUp(count, 'latency');
    return store.claimMany(OWNER, 600_000, count);
  };
  // Concurrent finishes share transactions (group commit).
  const finishLeases = (leases: Lease[]) =>
    Promise.all(leases.map((lease) => store.finish(lease.id, { owner: OWNER, token: lease.token }, null)));

  return {
    async measure(round) {
      const warmup = warm ? 0 : WARMUP;
      warm = true;
      // Each round sends through the gateway and through the bare gateway: a lease for each.
      const leases = await claimLeases(2 * (samples + warmup));
      const viaGw: number[] = [];
      const viaBare: number[] = [];
      const straight: number[] = [];
      const verified: number[] = [];
      const floors: number[] = [];
      let errors = 0;
      let firstError: string | undefined;
      const timed = async (into: number[], send: () => Promise<unknown>, record: boolean) => {
        const started = performance.now();
        try {
          await send();
          if (record) into.push(performance.now() - started);
        } catch (err) {
          errors++;
          firstError ??= err instanceof Error ? err.message : String(err);
        }
      };
      for (let i = 0; i < leases.length / 2; i++) {
        const record = i >= warmup;
        const lease = leases[2 * i]!;
        const other = leases[2 * i + 1]!;
        const kinds = [
          () => timed(viaGw, () => viaGateway(lease), record),
          () => timed(viaBare, () => viaBareGateway(other), record),
          () => timed(straight, () => direct(`direct-${runPrefix}-${round}-${i}`), record),
          () => timed(verified, () => queue.verify(lease.id, { owner: OWNER, token: lease.token }), record),
          () => timed(floors, floor, record),
        ];
        for (let k = 0; k < kinds.length; k++) await kinds[(i + k) % kinds.length]!();
      }
      await finishLeases(leases);
      return {
        gatewayP50Ms: percentile(viaGw, 50),
        gatewayP99Ms: percentile(viaGw, 99),
        bareGatewayP50Ms: percentile(viaBare, 50),
        bareGatewayP99Ms: percentile(viaBare, 99),
        directP50Ms: percentile(straight, 50),
        directP99Ms: percentile(straight, 99),
        verifyP50Ms: percentile(verified, 50),
        verifyP99Ms: percentile(verified, 99),
        floorP50Ms: percentile(floors, 50),
        floorP99Ms: percentile(floors, 99),
        samples: Math.min(viaGw.length, straight.length),
        errors,
        ...(firstError ? { firstError } : {}),
      };
    },
    peaks: () => ({ 'bare gateway front': peakRssMiB(bare.pid) }),
    async close() {
      gateway.close();
      bareGateway.close();
      await bare.stop();
      queue.close();
      agent.destroy();
      await echo.stop();
    },
  };
}
