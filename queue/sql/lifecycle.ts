// What cancel and retry share: a refused conditional write is read to say why, and written again
// when the read finds the job back in a state the write takes.

/**
 * How often a refused cancel or retry is tried again when the read that explains it finds the
 * job back in a state the write takes. Only PostgreSQL can see that (READ COMMITTED: another
 * transaction committed between the two statements); SQLite's write lock rules it out.
 */
export const LIFECYCLE_TRIES = 3;
