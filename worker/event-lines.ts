// How `leasehold worker` prints its lines: the events of one turn of the event loop are written
// together, in one write, before the process waits for anything again — a batch of finishes
// brings a dozen lines, and each write to a pipe is a system call. A line that must be out at
// once (a stall about to be frozen, the exit) is written with everything before it, in order.
import type { WorkerLine } from './events.js';

export interface EventLines {
  /** Printed by the end of this turn of the event loop, after the lines before it. */
  print(line: WorkerLine): void;
  /** Printed now, after the lines before it. */
  printNow(line: WorkerLine): void;
  /** Writes what is waiting; also done when the process exits. */
  flush(): void;
}

export function eventLines(write: (text: string) => void): EventLines {
  let pending = '';
  let scheduled = false;
  const flush = () => {
    scheduled = false;
    if (pending === '') return;
    const text = pending;
    pending = '';
    write(text);
  };
  process.on('exit', flush);
  return {
    print: (line) => {
      pending += `${JSON.stringify(line)}\n`;
      if (scheduled) return;
      scheduled = true;
      // After the I/O callbacks of this turn, before the event loop waits again.
      setImmediate(flush);
    },
    printNow: (line) => {
      pending += `${JSON.stringify(line)}\n`;
      flush();
    },
    flush,
  };
}
