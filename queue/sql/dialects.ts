// The SQL dialects the queue's statements come in. A statement that differs between them keeps
// its variants side by side in its own file, keyed by this name.
export type SqlDialect = 'sqlite' | 'postgres';

/** One compiled statement per dialect. */
export type ByDialect<T> = Record<SqlDialect, T>;
