// Types of build-if-stale.mjs, for the tests that import it.
export function sourceFolders(root: string): string[];
export function staleReason(root: string): string | undefined;
export function pruneOrphans(root: string): string[];
export function markBinsExecutable(root: string): string[];
