// Node's process warnings of one kind, collected for the length of the test that asks for them.
import { onTestFinished } from 'vitest';

/** The messages of every `name` warning (MaxListenersExceededWarning...) the process emits until the test ends. */
export function collectWarnings(name: string): string[] {
  const warnings: string[] = [];
  const onWarning = (warning: Error) => {
    if (warning.name === name) warnings.push(warning.message);
  };
  process.on('warning', onWarning);
  onTestFinished(() => {
    process.off('warning', onWarning);
  });
  return warnings;
}
