// The benchmark's smoke check, kept out of `npm test` (its files are in none of the layers):
//   npm run build && npx vitest run --config test/bench-smoke.config.ts
import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

export default defineConfig({
  root: fileURLToPath(new URL('..', import.meta.url)),
  test: {
    include: ['test/bench-smoke.check.ts'],
    testTimeout: 240_000,
    pool: 'forks',
  },
});
