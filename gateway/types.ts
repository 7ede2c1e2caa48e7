// The gateway's wire vocabulary: what a send asks and what it answers. The schema in
// schemas.ts validates exactly this shape; the client, the app and the worker share it.

/** `POST /send`: forward the job's effect under this lease. */
export interface SendRequest {
  jobId: string;
  owner: string;
  token: number;
  qty: number;
}

/** `200` from `POST /send`: the receiver's judgement of the forwarded effect. */
export interface SendOutcome {
  outcome: 'applied' | 'duplicate';
  effect: { jobId: string; qty: number; token: number; appliedAt: number };
}
