// The tests in four layers, each runnable alone (`npx vitest run --project unit`). A file is in
// exactly one layer; test/platform/test-layers.test.ts fails when a new file is in none or two.
import { defineConfig } from 'vitest/config';

const TEST_LAYERS = {
  // Pure rules and parsers: no database, no server.
  unit: [
    'test/**/rules.test.ts',
    'test/receiver/signature.test.ts',
    'test/receiver/schemas.test.ts',
    'test/queue/errors.test.ts',
    'test/scripts/build-if-stale.test.ts',
    'test/platform/boundaries.test.ts',
    'test/platform/directories.test.ts',
    'test/platform/flags.test.ts',
    'test/platform/ids.test.ts',
    'test/platform/named-sql.test.ts',
    'test/platform/option-names.test.ts',
    'test/platform/test-layers.test.ts',
    'test/demo/timeline-*.test.ts',
    'test/testing/clock.test.ts',
    'test/worker/stalls.test.ts',
  ],
  // Stores on real SQLite files and PostgreSQL schemas.
  db: [
    'test/**/store.*.test.ts',
    'test/**/store-unavailable.test.ts',
    'test/platform/sqlite-*.test.ts',
    'test/platform/group-commit.test.ts',
    'test/platform/database-conditions.test.ts',
    'test/platform/postgres-writes.test.ts',
    'test/queue/sqlite-plan.test.ts',
    'test/queue/sqlite-lease-checks.test.ts',
    'test/queue/sql-entry.test.ts',
    'test/queue/sql-rules.test.ts',
    'test/queue/claim-statements.test.ts',
    'test/queue/long-poll.test.ts',
    'test/queue/postgres.test.ts',
  ],
  // Express apps through supertest, and services started in this process with their clients.
  http: [
    'test/**/app.test.ts',
    'test/**/app-*.test.ts',
    'test/**/client.test.ts',
    'test/**/middleware*.test.ts',
    'test/platform/http-edge.test.ts',
    'test/platform/json-body.test.ts',
    'test/platform/json-peer.test.ts',
    'test/platform/library-options.test.ts',
    'test/platform/listen.test.ts',
    'test/audit/audit.test.ts',
    'test/gateway/faults.test.ts',
    'test/gateway/downstream-faults.test.ts',
    'test/conform/conform.test.ts',
    'test/conform/broken.test.ts',
    'test/conform/receiver.test.ts',
    'test/gateway/verifier.test.ts',
    'test/receiver/stub.test.ts',
    'test/receiver/stub-helpers.test.ts',
    'test/worker/lease.test.ts',
    'test/worker/run.test.ts',
    'test/worker/{concurrency,prefetch,shutdown,outputs,connections,effects,finish-batch,send-batch}.test.ts',
    'test/testing/{zombie,system,expect,downstreams}.test.ts',
  ],
  // Real child processes: the built CLI, several processes on one database, kill -9, the demo.
  system: [
    'test/system/**/*.test.ts',
    'test/**/process.test.ts',
    'test/**/multiprocess.test.ts',
    'test/queue/crash.test.ts',
    'test/testing/node-test.test.ts',
    'test/platform/service-main.test.ts',
  ],
} as const;

export default defineConfig({
  test: {
    // Multi-process and kill -9 tests spawn real services; give them room on a loaded 2-core machine.
    testTimeout: 60_000,
    hookTimeout: 60_000,
    pool: 'forks',
    fileParallelism: true,
    maxWorkers: 2,
    allowOnly: false,
    // Asks the test PostgreSQL once whether it answers; without it (and without CI=true) its suites are skipped.
    globalSetup: ['test/helpers/postgres-probe.ts'],
    projects: Object.entries(TEST_LAYERS).map(([name, include]) => ({
      extends: true,
      test: { name, include: [...include] },
    })),
  },
});
