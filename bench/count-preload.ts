// Loaded into each service the benchmark starts (`node --import`): counts its statements and
// incoming requests (counting.ts) and prints them on stdout, one line, whenever sent SIGUSR2.
import { COUNTS_LINE, installCounters, processCounts } from './counting.js';

installCounters();
process.on('SIGUSR2', () => {
  process.stdout.write(`${COUNTS_LINE}${JSON.stringify(processCounts())}\n`);
});
