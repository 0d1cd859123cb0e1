import type { Env } from '@honest-health/platform';

/**
 * Development mode (README, "Two commands"): only the embedded database with nothing set; any
 * DATABASE_URL, token key or XERO_* variable turns it off.
 */
export function wantsDevelopmentSandbox(env: Env): boolean {
  const set = (name: string) => env[name] !== undefined && env[name] !== '';
  return (
    !set('DATABASE_URL') &&
    !set('TOKEN_ENCRYPTION_KEY') &&
    !Object.keys(env).some((k) => k.startsWith('XERO_') && set(k))
  );
}
