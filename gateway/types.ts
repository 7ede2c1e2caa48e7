// The gateway's wire vocabulary: what a send asks and what it answers. The schema in
// schemas.ts validates exactly this shape; the client, the app and the worker share it.

/** The downstream a send without `to` goes to: the gateway's `--receiver`. */
export const DEFAULT_DOWNSTREAM = 'receiver';

/** `POST /send`: forward one effect of the job under this lease. */
export interface SendRequest {
  jobId: string;
  owner: string;
  token: number;
  /** The downstream's name (default `receiver`). */
  to?: string | undefined;
  /** The effect's key within the job (1–128 characters); left out, the job's one default effect. */
  key?: string | undefined;
  /** An integer >= 1; the default effect's must be the job's. May be left out when `body` is given. */
  qty?: number | undefined;
  /** Any JSON value, at most 64 KiB serialized, recorded with the effect. */
  body?: unknown;
}

/** An effect as a downstream recorded it. */
export interface RecordedEffect {
  jobId: string;
  /** Null or absent for the job's default effect. */
  key?: string | null;
  qty?: number | null;
  body?: unknown;
  token: number;
  appliedAt: number;
}

/** `200` from `POST /send`: the downstream's judgement of the forwarded effect. */
export interface SendOutcome {
  outcome: 'applied' | 'duplicate';
  effect: RecordedEffect;
}
