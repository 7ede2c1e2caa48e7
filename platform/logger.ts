// The one way a leasehold command makes its logger: JSON lines on stderr, the same base fields in
// every service, written synchronously so nothing logged is lost when the process exits right after.
import { pino, type Logger } from 'pino';

/** The `service` field of every log line, one value per command. */
export type ServiceName = 'queue' | 'gateway' | 'receiver' | 'worker';

export interface LoggerOptions {
  service: ServiceName;
  /** One of LOG_LEVELS (platform/flags.ts). */
  level: string;
}

export function createLogger({ service, level }: LoggerOptions): Logger {
  return pino({ level, base: { service, pid: process.pid } }, pino.destination({ dest: 2, sync: true }));
}
