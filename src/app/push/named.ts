import {
  type Database,
  errorCode,
  forbidNamedStatements,
  NAMED_STATEMENT_LOST,
  statementName,
} from '@honest-health/platform';
import type { SQL } from 'drizzle-orm';
import { PgDialect } from 'drizzle-orm/pg-core';

// The claim and the settle are long statements that run every tick with only their parameters
// changing: planned afresh each time as the unnamed statement, their planning is a large share of the
// database's work per push. As named statements the server parses them once per connection and, once
// its plan cache judges a generic plan no dearer than the custom ones, stops planning them
// (PostgreSQL docs, PREPARE: "plan_cache_mode"). Behind a transaction pooler they stay unnamed
// (statementName), as the ingress insert does.

const dialect = new PgDialect();

/** FNV-1a of the text: the same name for the same text, another for another (options change it). */
function textHash(text: string): string {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return (h >>> 0).toString(36);
}

/** Runs `statement` as the named prepared statement `<name>_<hash of its text>` where names survive. */
export async function executeNamed(db: Database, name: string, statement: SQL): Promise<unknown> {
  // A Database that is only an execute() (a test's EXPLAIN wrapper) runs it as it is.
  const session = (db as Partial<Database>)._?.session;
  if (session === undefined) return db.execute(statement);
  const query = dialect.sqlToQuery(statement);
  const run = (named: string) =>
    session.prepareQuery(query, undefined, named === '' ? undefined : named, false).execute();
  try {
    return await run(statementName(db, `${name}_${textHash(query.sql)}`));
  } catch (err) {
    // Lost to a pooler that detection missed: refused at Parse or Bind, before anything ran, so
    // running it again unnamed cannot claim or settle twice.
    if (!NAMED_STATEMENT_LOST.has(errorCode(err) ?? '')) throw err;
    forbidNamedStatements(db);
    return run('');
  }
}
