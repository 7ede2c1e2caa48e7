// The benchmark's smoke checks, kept out of `npm test` (their files are in none of the layers):
//   npm run build && npx vitest run --config test/bench-smoke.config.ts
// (`test/bench-peers-smoke.check.ts` alone: add it as a filter; it needs PostgreSQL, and
// redis-server for the BullMQ columns.)
import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

export default defineConfig({
  root: fileURLToPath(new URL('..', import.meta.url)),
  test: {
    include: ['test/bench-smoke.check.ts', 'test/bench-peers-smoke.check.ts'],
    testTimeout: 240_000,
    pool: 'forks',
  },
});
