import type { Database } from './types.js';

// Whether a named (protocol-level) prepared statement survives on a pool's connections. Behind a
// transaction-mode pooler it does not: PgBouncer 1.18 ("Protocol-level prepared plans: No" in
// transaction pooling; 1.21+ only with max_prepared_statements) hands the next transaction to any
// server connection, where the name is unknown (26000) or already taken by another client (42P05).
// Drivers register their pools here; a pool nobody registered keeps names (PGlite, Neon over HTTP).

const allowsNames = new WeakMap<object, () => boolean>();
const forbid = new WeakMap<object, () => void>();

/**
 * Registers a driver's pool: whether its Drizzle database may use named prepared statements now, and
 * what to call when one is lost.
 */
export function registerStatementPolicy(db: Database, allowed: () => boolean, disallow: () => void): void {
  allowsNames.set(db, allowed);
  forbid.set(db, disallow);
}

/**
 * One driver's switch for every pool it makes: named statements until one is lost, then unnamed ones
 * from then on, for all of them (the pooler in front is the same). `lost` is warned once, if given.
 */
export class StatementNaming {
  constructor(
    public named: boolean,
    private readonly lost?: () => void,
  ) {}

  register(db: Database): void {
    registerStatementPolicy(
      db,
      () => this.named,
      () => {
        if (this.named) this.lost?.();
        this.named = false;
      },
    );
  }
}

/** The name to prepare a statement under on `db`: '' (the unnamed statement) where names do not survive. */
export function statementName(db: Database, name: string): string {
  return (allowsNames.get(db)?.() ?? true) ? name : '';
}

/** A named statement failed the way only a transaction pooler makes it fail: stop naming statements. */
export function forbidNamedStatements(db: Database): void {
  forbid.get(db)?.();
}

/** 42P05 duplicate_prepared_statement and 26000 invalid_sql_statement_name: never a real query error here. */
export const NAMED_STATEMENT_LOST = new Set(['42P05', '26000']);
