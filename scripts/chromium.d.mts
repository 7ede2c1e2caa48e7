// Types of chromium.mjs, for the tests that import it.
import type { Browser } from 'playwright-core';
export const CHROMIUM: string;
export const CHROMIUM_ARGS: readonly string[];
export function launchHeadless(): Promise<Browser>;
