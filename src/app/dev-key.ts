import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { generateKeyBase64 } from '@honest-health/platform/crypto';

/**
 * The embedded database's token key: made once under .data/ so local tokens survive a restart.
 * Never used with a real database (configuration requires TOKEN_ENCRYPTION_KEY there).
 */
export function developmentKey(path: string): { key: string; created: boolean } {
  try {
    return { key: readFileSync(path, 'utf8').trim(), created: false };
  } catch {
    const key = generateKeyBase64();
    mkdirSync(dirname(path), { recursive: true });
    writeFileSync(path, `${key}\n`, { mode: 0o600 });
    return { key, created: true };
  }
}
