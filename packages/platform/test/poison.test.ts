// isPoisoned/poisonReason on hand-built errors: the conditions test/poison.test.ts cannot provoke
// against real servers, and non-errors. Pure: no server, no driver connection.

import { isPoisoned, poisonReason } from '@honest-health/platform';
import { NeonDbError } from '@neondatabase/serverless';
import pg from 'pg';
import { describe, expect, it } from 'vitest';

// postgres.js (not installed) builds its connection errors this way (src/errors.js `connection()`).
const postgresJs = (code: string) =>
  Object.assign(new Error(`write ${code} 127.0.0.1:5432`), {
    code,
    errno: code,
    address: '127.0.0.1',
    port: 5432,
  });
const sysErr = (code: string, errno: number, syscall: string, message: string) =>
  Object.assign(new Error(message), { code, errno, syscall });
// A pg DatabaseError as pg-protocol would build it from an ErrorResponse.
const dbError = (code: string, message: string) =>
  Object.assign(new pg.DatabaseError(message, 0, 'error'), { code });
const cyclic = new Error('wrapper');
cyclic.cause = cyclic;
const wrapped = (depth: number, inner: unknown): unknown =>
  depth === 0 ? inner : new Error(`wrapper ${depth}`, { cause: wrapped(depth - 1, inner) });
function engineTypeError(): unknown {
  try {
    return (undefined as unknown as { id: number }).id;
  } catch (error) {
    return error;
  }
}
const reset = () => sysErr('ECONNRESET', -104, 'read', 'read ECONNRESET');

const handBuilt: Array<[string, unknown, string | undefined]> = [
  ['hand-built: postgres.js CONNECTION_CLOSED', postgresJs('CONNECTION_CLOSED'), 'CONNECTION_CLOSED'],
  ['hand-built: postgres.js CONNECTION_ENDED', postgresJs('CONNECTION_ENDED'), 'CONNECTION_ENDED'],
  [
    'hand-built: postgres.js CONNECTION_DESTROYED',
    postgresJs('CONNECTION_DESTROYED'),
    'CONNECTION_DESTROYED',
  ],
  ['hand-built: write EPIPE', sysErr('EPIPE', -32, 'write', 'write EPIPE'), 'EPIPE'],
  [
    'hand-built: kernel connect timeout ETIMEDOUT',
    sysErr('ETIMEDOUT', -110, 'connect', 'connect ETIMEDOUT 10.0.0.1:5432'),
    'ETIMEDOUT',
  ],
  [
    'hand-built: libpq "SSL connection has been closed unexpectedly"',
    new Error('SSL connection has been closed unexpectedly'),
    'ssl closed',
  ],
  [
    'hand-built: libpq "SSL SYSCALL error: EOF detected"',
    new Error('SSL SYSCALL error: EOF detected'),
    'ssl closed',
  ],
  [
    'hand-built: 57P02 as a FATAL error (PostgreSQL 13 and older)',
    dbError('57P02', 'terminating connection because of crash of another server process'),
    '57P02',
  ],
  ['hand-built: 08P01 protocol violation', dbError('08P01', 'invalid frontend message type 0'), '08P01'],
  ['hand-built: 08003 connection does not exist', dbError('08003', 'connection does not exist'), '08003'],
  [
    'hand-built: Neon HTTP 503',
    new NeonDbError('Server error (HTTP status 503): {"message":"compute is starting"}'),
    'http 503',
  ],
  [
    'hand-built: Neon HTTP 404 (a misconfigured endpoint, not a broken pool)',
    new NeonDbError('Server error (HTTP status 404): not found'),
    undefined,
  ],
  ['hand-built: ECONNRESET under 7 wrappers', wrapped(7, reset()), 'ECONNRESET'],
  ['hand-built: ECONNRESET under 8 wrappers (past the depth bound)', wrapped(8, reset()), undefined],
  ['hand-built: a cause cycle', cyclic, undefined],
  // Never poison, whatever they say:
  [
    'application error quoting a driver message',
    new Error('invoice 42: Connection terminated is not a valid status'),
    undefined,
  ],
  ['a TypeError thrown by the engine in application code', engineTypeError(), undefined],
  ['a string', 'Connection terminated unexpectedly', undefined],
  ['null', null, undefined],
  ['undefined', undefined, undefined],
  ['a plain object with a non-poison code', { code: '23505' }, undefined],
];

describe('isPoisoned / poisonReason on hand-built errors and non-errors', () => {
  for (const [name, err, reason] of handBuilt) {
    it(`${name} -> ${reason ?? 'not poisoned'}`, () => {
      expect(poisonReason(err)).toBe(reason);
      expect(isPoisoned(err)).toBe(reason !== undefined);
    });
  }
});
