// "A job may have become claimable": the signal long-polling claims wait on. In one process it
// is a list of listeners called after the commit; on PostgreSQL, queue processes on other hosts
// hear each other's commits through LISTEN/NOTIFY as well.
import type { Knex } from 'knex';

export class ClaimableSignal {
  private readonly listeners = new Set<() => void>();

  subscribe(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => {
      this.listeners.delete(listener);
    };
  }

  /** Resolves once the signal hears every commit it is meant to (PostgreSQL: once it LISTENs). */
  async ready(): Promise<void> {}

  /**
   * Called after a commit that may have made a job claimable. `notified`: the commit itself
   * NOTIFYed the other processes (an enqueue on PostgreSQL), so only this process's waiters are told.
   */
  notify(_notified = false): void {
    this.deliver();
  }

  protected deliver(): void {
    for (const listener of [...this.listeners]) listener();
  }

  async close(): Promise<void> {
    this.listeners.clear();
  }
}

/** One channel per schema, so queues that share a database but not a schema do not wake each other. */
export function channelOf(schema: string | undefined): string {
  // Schema names are plain identifiers (checked where they are parsed), safe in SQL as they are.
  return schema ? `leasehold_claimable_${schema}` : 'leasehold_claimable';
}

interface PgConnection {
  query(sql: string): Promise<unknown>;
  on(event: 'notification', listener: () => void): void;
  on(event: 'error', listener: (err: unknown) => void): void;
}

/**
 * The signal across processes sharing one PostgreSQL database: each store keeps one connection
 * of its own LISTENing (outside the pool, which it must not hold), and a commit here both wakes
 * this process's waiters at once and NOTIFYs the others. A lost listening connection only
 * slows pickup down to the waiters' own re-polls; it is not reopened.
 */
export class PostgresClaimableSignal extends ClaimableSignal {
  private connection: Promise<PgConnection | undefined>;
  private readonly channel: string;

  constructor(
    private readonly knex: Knex,
    schema: string | undefined,
  ) {
    super();
    this.channel = channelOf(schema);
    const client = knex.client as { acquireRawConnection(): Promise<PgConnection> };
    this.connection = client.acquireRawConnection().then(
      async (conn) => {
        conn.on('notification', () => this.deliver());
        conn.on('error', () => undefined);
        await conn.query(`LISTEN ${this.channel}`);
        return conn;
      },
      () => undefined,
    );
  }

  override async ready(): Promise<void> {
    await this.connection;
  }

  override notify(notified = false): void {
    this.deliver();
    if (notified) return;
    // Other processes' waiters; a failure here costs them only their next re-poll.
    this.knex.raw('SELECT pg_notify(?, ?)', [this.channel, '']).catch(() => undefined);
  }

  override async close(): Promise<void> {
    await super.close();
    const conn = await this.connection;
    if (conn)
      await (this.knex.client as { destroyRawConnection(c: unknown): Promise<void> }).destroyRawConnection(conn);
  }
}
