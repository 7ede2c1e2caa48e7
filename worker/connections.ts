// The worker's connections: kept alive between requests, but a connection idle for longer than
// `freshMs` is never reused — judged by the wall clock when the next request is made, so a
// worker that was paused (SIGSTOP, a long GC) opens fresh connections instead of writing into
// one the server closed while it was stopped.
import http from 'node:http';
import type { Socket } from 'node:net';
import { connectionIsFresh } from './rules.js';
import { checkOptionNames, type OptionNames } from '../platform/option-names.js';

/**
 * Shorter than the services' keep-alive timeout (5 s, platform/listen.ts), so a connection is
 * retired by the worker before the server would close it: reuse never races the server's close.
 */
export const FRESH_CONNECTION_MS = 2_000;

const idleSince = Symbol('idleSince');
type IdleSocket = Socket & { [idleSince]?: number };

export interface FreshAgentOptions {
  freshMs?: number;
  maxSockets?: number;
  /** Wall-clock time in epoch ms (tests move it). */
  now?: () => number;
}

const FRESH_AGENT_OPTION_NAMES: OptionNames<FreshAgentOptions> = { freshMs: true, maxSockets: true, now: true };

export class FreshAgent extends http.Agent {
  private readonly freshMs: number;
  private readonly now: () => number;

  constructor(options: FreshAgentOptions = {}) {
    checkOptionNames('FreshAgent', options, FRESH_AGENT_OPTION_NAMES);
    super({ keepAlive: true, maxSockets: options.maxSockets ?? 64, keepAliveMsecs: 1_000 });
    this.freshMs = options.freshMs ?? FRESH_CONNECTION_MS;
    this.now = options.now ?? Date.now;
  }

  /** A request is about to pick a free connection: retire the ones idle too long first. */
  addRequest(req: http.ClientRequest, options: http.RequestOptions): void {
    const name = this.getName(options);
    const now = this.now();
    for (const socket of (this.freeSockets[name] ?? []) as IdleSocket[]) {
      // Node's agent skips destroyed sockets at the front of the free list; free sockets are in
      // the order they became free, so the stale ones are exactly that front.
      if (!connectionIsFresh(socket[idleSince] ?? -Infinity, now, this.freshMs)) socket.destroy();
    }
    (http.Agent.prototype as unknown as AgentInternals).addRequest.call(this, req, options);
  }

  // Node's agent returns whether it keeps the socket; @types/node says void.
  override keepSocketAlive(socket: IdleSocket): boolean {
    const kept = super.keepSocketAlive(socket) as unknown as boolean;
    socket[idleSince] = this.now();
    // Idle connections also go in the background, so none lingers for the server to close.
    socket.setTimeout(this.freshMs);
    return kept;
  }

  override reuseSocket(socket: IdleSocket, req: http.ClientRequest): void {
    socket[idleSince] = undefined;
    // The idle timer is for free connections; a request in flight (a long poll) has its own.
    socket.setTimeout(0);
    super.reuseSocket(socket, req);
  }
}

/** What @types/node leaves out of http.Agent: the method every request goes through. */
interface AgentInternals {
  addRequest(req: http.ClientRequest, options: http.RequestOptions): void;
}
