// A real browser for the pages a person sees: Debian's chromium driven by playwright-core, which
// downloads no browser of its own. Each launch gets a fresh profile in a temp dir, removed on close.
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type BrowserContext, chromium } from 'playwright-core';

export const CHROMIUM_PATH = '/usr/bin/chromium';
export const CHROMIUM_HINT = "needs Debian's chromium: apt-get install chromium";
/** The prefix of each launch's profile dir in os.tmpdir(). */
export const CHROMIUM_PROFILE_PREFIX = 'hh-chromium-';

// Nothing but the pages under test: no network of its own (updates, sync, QUIC probes), no GPU, and no
// sandbox (tests run as root in containers, where Chromium's sandbox cannot start).
const ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

/**
 * For `describe.skipIf(!hasChromium)`. Where it is missing, one line on stderr says what to install;
 * under CI it throws, as .ci/run installs it and a CI that silently lacks it would hide the suite.
 */
export const hasChromium: boolean = (() => {
  if (existsSync(CHROMIUM_PATH)) return true;
  if (process.env.CI === 'true') throw new Error(`the browser tests ${CHROMIUM_HINT} (CI installs it)`);
  console.warn(`skipping the browser tests: no ${CHROMIUM_PATH}; ${CHROMIUM_HINT}`);
  return false;
})();

export interface Chromium {
  /** The person's browser: the profile's own context. */
  person: BrowserContext;
  /** Someone else, in a context that shares no cookie with the person's (close it when done). */
  stranger(): Promise<BrowserContext>;
  /** Closes the browser and removes its profile dir. */
  close(): Promise<void>;
}

export async function launchChromium(): Promise<Chromium> {
  const profile = mkdtempSync(join(tmpdir(), CHROMIUM_PROFILE_PREFIX));
  const removeProfile = () => rmSync(profile, { recursive: true, force: true });
  let person: BrowserContext;
  try {
    person = await chromium.launchPersistentContext(profile, {
      executablePath: CHROMIUM_PATH,
      headless: true,
      args: ARGS,
    });
  } catch (err) {
    removeProfile();
    throw err;
  }
  return {
    person,
    async stranger() {
      const browser = person.browser();
      if (!browser) throw new Error('the persistent context has no browser to open another context in');
      return browser.newContext();
    },
    async close() {
      try {
        await person.close();
      } finally {
        removeProfile();
      }
    },
  };
}
