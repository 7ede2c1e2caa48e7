// Typings for the two knex internals that queue/sqlite.ts subclasses.
declare module 'knex/lib/dialects/sqlite3/index.js' {
  import type { Knex } from 'knex';
  class Client_SQLite3 extends Knex.Client {
    transaction(...args: unknown[]): unknown;
    // The subclass narrows these to the sqlite3 connection and knex's query object it handles.
    // eslint-disable-next-line @typescript-eslint/no-explicit-any -- parameters the subclass narrows
    _query(connection: any, obj: any): Promise<unknown>;
    // eslint-disable-next-line @typescript-eslint/no-explicit-any -- as above
    destroyRawConnection(connection: any): Promise<void>;
  }
  export default Client_SQLite3;
}

declare module 'knex/lib/dialects/sqlite3/execution/sqlite-transaction.js' {
  class Transaction_Sqlite {
    constructor(client: unknown, ...args: unknown[]);
    trxClient: { query(conn: unknown, sql: string): Promise<unknown> };
    _completed: boolean;
    _resolver(value: unknown): void;
    _rejecter(err: unknown): void;
    begin(conn: unknown): Promise<unknown>;
    commit(conn: unknown, value: unknown): Promise<unknown>;
    query(conn: unknown, sql: string, status?: number, value?: unknown): Promise<unknown>;
  }
  export default Transaction_Sqlite;
}
