// The demo's second downstream, "mailer": a small service of the demo's own built on
// fencedEffects. Each effect it applies is written to its outbox table in the transaction that
// records it, so the mail and its record are one commit. It lists its effects and journal as
// the receiver does (GET /effects, GET /journal), so the demo's verdict and `leasehold audit`
// read it the same way, and shows its outbox (GET /outbox).
import express, { type Express } from 'express';
import type { Knex } from 'knex';
import { pino, type Logger } from 'pino';
import { z } from 'zod';
import { listen, type Listening } from '../platform/listen.js';
import {
  fencedEffects,
  migrateDownstream,
  openSqliteEffectStore,
  receiverErrors,
  ReceiverError,
  type Effect,
  type KnexEffectStore,
} from '../receiver/index.js';

/** One mail the mailer sent: the effect's body's `to` and `subject`, when it had them. */
export interface Mail {
  jobId: string;
  key: string | null;
  to: string | null;
  subject: string | null;
  token: number;
  sentAt: number;
}

const OUTBOX = 'mailer_outbox';

const MIGRATIONS = [
  {
    name: '001_mailer_outbox',
    up: (knex: Knex) =>
      knex.schema.createTable(OUTBOX, (t) => {
        t.string('job_id').notNullable();
        // '' for the default effect: a primary key column cannot be null.
        t.string('effect_key').notNullable();
        t.text('to');
        t.text('subject');
        t.integer('token').notNullable();
        t.bigInteger('sent_at').notNullable();
        t.primary(['job_id', 'effect_key']);
      }),
  },
];

const MAX_PAGE = 1_000;
const limit = z.coerce.number().int().min(1).max(MAX_PAGE).default(100);
/** The cursor is the mailer's own: `[jobId, key]` as JSON, handed back as `next`. */
const cursor = z
  .string()
  .transform((text, ctx) => {
    try {
      return z.tuple([z.string().min(1), z.string().nullable()]).parse(JSON.parse(text));
    } catch {
      ctx.issues.push({ code: 'custom', message: 'after must be the `next` of the page before', input: text });
      return z.NEVER;
    }
  })
  .optional();
const effectsQuery = z.strictObject({ jobId: z.string().min(1).max(256).optional(), after: cursor, limit });
const journalQuery = z.strictObject({ after: z.coerce.number().int().min(0).optional(), limit });

function parsed<T extends z.ZodType>(schema: T, query: unknown): z.infer<T> {
  const result = schema.safeParse({ ...(query as object) });
  if (result.success) return result.data;
  throw new ReceiverError(
    'invalid_request',
    `Bad query string: ${result.error.issues.map((i) => i.message).join('; ')}.`,
  );
}

const textOf = (body: unknown, field: string): string | null => {
  const value = (body as Record<string, unknown> | null | undefined)?.[field];
  return typeof body === 'object' && typeof value === 'string' ? value : null;
};

export function createMailerApp(options: { store: KnexEffectStore; secret?: string; logger?: Logger }): Express {
  const { store } = options;
  const logger = options.logger ?? pino({ level: 'silent' });
  const app = express();
  app.disable('x-powered-by');
  app.disable('etag');
  app.get('/healthz', (_req, res) => {
    res.json({ ok: true });
  });
  app.post(
    '/effects',
    fencedEffects({
      store,
      logger,
      ...(options.secret === undefined ? {} : { secret: options.secret }),
      // The mail goes into the outbox in the transaction that records the effect: one commit.
      apply: async (effect: Effect, tx: Knex.Transaction) => {
        await tx(OUTBOX).insert({
          job_id: effect.jobId,
          effect_key: effect.key ?? '',
          to: textOf(effect.body, 'to'),
          subject: textOf(effect.body, 'subject'),
          token: effect.token,
          sent_at: effect.appliedAt,
        });
      },
    }),
  );
  app.get('/effects', async (req, res) => {
    const query = parsed(effectsQuery, req.query);
    const items = await store.listEffects({
      ...(query.jobId === undefined ? {} : { jobId: query.jobId }),
      ...(query.after === undefined
        ? {}
        : {
            after: query.after[1] === null ? { jobId: query.after[0] } : { jobId: query.after[0], key: query.after[1] },
          }),
      limit: query.limit + 1,
    });
    const page = items.slice(0, query.limit);
    const last = page.at(-1);
    res.json({
      effects: page,
      next: items.length > query.limit && last ? JSON.stringify([last.jobId, last.key ?? null]) : null,
    });
  });
  app.get('/journal', async (req, res) => {
    const query = parsed(journalQuery, req.query);
    const items = await store.journal({
      ...(query.after === undefined ? {} : { after: query.after }),
      limit: query.limit + 1,
    });
    const page = items.slice(0, query.limit);
    res.json({ journal: page, next: items.length > query.limit ? page.at(-1)!.seq : null });
  });
  app.get('/totals', async (_req, res) => {
    res.json(await store.totals());
  });
  app.get('/outbox', async (_req, res) => {
    const rows = (await store.knex(OUTBOX).select().orderBy(['job_id', 'effect_key'])) as Array<
      Record<string, unknown>
    >;
    const mails: Mail[] = rows.map((r) => ({
      jobId: String(r.job_id),
      key: r.effect_key === '' ? null : String(r.effect_key),
      to: (r.to as string | null) ?? null,
      subject: (r.subject as string | null) ?? null,
      token: Number(r.token),
      sentAt: Number(r.sent_at),
    }));
    res.json({ mails });
  });
  app.use((req, _res, next) =>
    next(
      new ReceiverError(
        'not_found',
        `The mailer has no route ${req.method} ${req.path}; it serves POST /effects, GET /effects, /journal, /totals and /outbox.`,
      ),
    ),
  );
  app.use(receiverErrors(logger));
  return app;
}

export interface MailerHandle {
  url: string;
  close(): Promise<void>;
}

/** Opens the mailer's SQLite file (created and migrated when new), and listens. */
export async function startMailer(options: {
  db: string;
  host?: string;
  port?: number;
  secret?: string;
  logger?: Logger;
}): Promise<MailerHandle> {
  const store = await openSqliteEffectStore({ filename: options.db });
  let server: Listening;
  try {
    await migrateDownstream(store, MIGRATIONS);
    const app = createMailerApp({
      store,
      ...(options.secret === undefined ? {} : { secret: options.secret }),
      ...(options.logger ? { logger: options.logger } : {}),
    });
    server = await listen(app, options.host ?? '127.0.0.1', options.port ?? 0);
  } catch (err) {
    await store.close();
    throw err;
  }
  let closing: Promise<void> | undefined;
  return {
    url: server.url,
    close: () =>
      (closing ??= (async () => {
        await server.close();
        await store.close();
      })()),
  };
}
