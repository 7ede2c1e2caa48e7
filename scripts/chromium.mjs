// Debian's Chromium, headless, as the browser tests and the scripts start it: no browser
// download, and no background networking, which this machine's closed network would refuse.
import { chromium } from 'playwright-core';

export const CHROMIUM = process.env.LEASEHOLD_CHROMIUM ?? '/usr/bin/chromium';

export const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

/** A headless Chromium at CHROMIUM; the caller closes it. */
export function launchHeadless() {
  return chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS });
}
