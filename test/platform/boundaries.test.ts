// The lint rule that keeps the parts apart (eslint.config.js, leasehold/boundaries), run on small
// sources through ESLint's own API, so the rule cannot quietly stop reporting.
import { fileURLToPath } from 'node:url';
import { ESLint } from 'eslint';
import { describe, expect, test } from 'vitest';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const eslint = new ESLint({ cwd: ROOT, overrideConfigFile: `${ROOT}eslint.config.js` });

/** What the boundary rule says about `source` as if it were the file at `path`. */
async function boundaryMessages(path: string, source: string): Promise<string[]> {
  const [result] = await eslint.lintText(source, { filePath: `${ROOT}${path}` });
  return (result?.messages ?? []).map((m) => `${m.ruleId ?? 'parse'}: ${m.message}`).filter((m) => !m.startsWith('@'));
}

describe('leasehold/boundaries', () => {
  test("a part importing another part's internals is reported, with the folder and what to import instead", async () => {
    const messages = await boundaryMessages(
      'gateway/x.ts',
      "import { KnexQueueStore } from '../queue/knex-store.js';\nexport const store = KnexQueueStore;\n",
    );
    expect(messages).toEqual([
      "leasehold/boundaries: gateway/ reaches into queue/'s internals (queue/knex-store.ts): " +
        "import it from queue/'s public face instead (queue/index.ts, queue/client.ts or queue/types.ts).",
    ]);
  });

  test('re-exports, type-only and dynamic imports are checked too', async () => {
    const messages = await boundaryMessages(
      'worker/x.ts',
      [
        "export { QueueError } from '../queue/errors.js';",
        "import type { QueueStore } from '../queue/store.js';",
        "export const load = () => import('../gateway/send.js');",
        'export type Store = QueueStore;',
      ].join('\n'),
    );
    expect(messages).toHaveLength(3);
    expect(messages.join('\n')).toMatch(/queue\/errors\.ts[\s\S]*queue\/store\.ts[\s\S]*gateway\/send\.ts/);
  });

  test("a part's public face, its own files and platform/ pass", async () => {
    const source = [
      "import { QueueClient } from '../queue/index.js';",
      "import { GatewayClient } from '../gateway/client.js';",
      "import type { Job } from '../queue/types.js';",
      "import { signatureHeader } from '../receiver/signature.js';",
      "import { openSqlite } from '../platform/sqlite.js';",
      "import { errorMessage } from './rules.js';",
      'export const used: unknown[] = [QueueClient, GatewayClient, signatureHeader, openSqlite, errorMessage];',
      'export type J = Job;',
    ].join('\n');
    expect(await boundaryMessages('worker/x.ts', source)).toEqual([]);
  });

  test('platform/ imports no part, not even its public face', async () => {
    const messages = await boundaryMessages(
      'platform/x.ts',
      "import { QueueError } from '../queue/index.js';\nexport const e = QueueError;\n",
    );
    expect(messages).toHaveLength(1);
    expect(messages[0]).toContain('platform/ is the floor the services stand on');
  });

  test("cli/ may import each part's main; bench/ only the queue's SQL entry point beyond the public face", async () => {
    expect(
      await boundaryMessages(
        'cli/x.ts',
        "import { queueCommand } from '../queue/main.js';\nexport const c = queueCommand;\n",
      ),
    ).toEqual([]);
    expect(
      await boundaryMessages(
        'bench/x.ts',
        "import { claimManyIn } from '../queue/sql/index.js';\nexport const c = claimManyIn;\n",
      ),
    ).toEqual([]);
    for (const source of [
      "import { queueCommand } from '../queue/main.js';\nexport const c = queueCommand;\n",
      "import { KnexQueueStore } from '../queue/knex-store.js';\nexport const c = KnexQueueStore;\n",
      "import { claimManyIn } from '../queue/sql/claim.js';\nexport const c = claimManyIn;\n",
    ]) {
      expect(await boundaryMessages('bench/x.ts', source), source).toHaveLength(1);
    }
  });

  test('tests may reach into any part', async () => {
    const source = "import { claimIn } from '../../queue/knex-store.js';\nexport const c = claimIn;\n";
    expect(await boundaryMessages('test/queue/x.test.ts', source)).toEqual([]);
  });
});
