// Finds secrets in text: the literal values the test suite configures, and the shapes of the secrets
// it makes up as it goes (API keys, Xero access tokens, passwords in connection strings).
import { HEARTBEAT_TEST_KEY } from './heartbeat-sink.js';
import { TEST_TOKEN_KEY } from './server.js';

export interface SecretPattern {
  name: string;
  pattern: RegExp;
}

export interface Finding {
  name: string;
  /** The offending line, with the secret itself masked. */
  line: string;
  lineNumber: number;
}

const escapeRegExp = (value: string) => value.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

export const literal = (name: string, value: string): SecretPattern => ({
  name,
  pattern: new RegExp(escapeRegExp(value)),
});

/** What no log line of any test may contain. */
export const SUITE_SECRETS: readonly SecretPattern[] = [
  literal('TOKEN_ENCRYPTION_KEY of the tests', TEST_TOKEN_KEY),
  literal('XERO_CLIENT_SECRET of the tests', 'sandbox-secret'),
  literal('METRICS_TOKEN of the tests', 'metrics-test-token-0c1d'),
  // The secret part of the tests' heartbeat URLs (test/support/heartbeat-sink.ts).
  literal('heartbeat ping key of the tests', HEARTBEAT_TEST_KEY),
  // 32 random bytes, base64url, behind the API key prefix (src/app/api-keys.ts).
  { name: 'an API key', pattern: /hh_live_[A-Za-z0-9_-]{40,}/ },
  // The Xero sandbox's access tokens are JWTs, as Xero's are.
  { name: 'a bearer JWT', pattern: /eyJ[\w-]{8,}\.eyJ[\w-]{8,}\.[\w-]*/ },
  // Any connection string: even without a password it names hosts and users.
  { name: 'a connection string', pattern: /postgres(?:ql)?:\/\/[^\s"']+/ },
];

export function scanForSecrets(text: string, patterns: readonly SecretPattern[]): Finding[] {
  const findings: Finding[] = [];
  for (const [index, line] of text.split('\n').entries()) {
    for (const { name, pattern } of patterns) {
      const match = pattern.exec(line);
      if (!match) continue;
      const masked = line.replace(match[0], `<${name}>`);
      findings.push({ name, line: masked.slice(0, 300), lineNumber: index + 1 });
    }
  }
  return findings;
}
