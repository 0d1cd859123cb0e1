// Is there a transaction-mode pooler between us and Postgres? Session state set on one client
// connection shows up on another one exactly when the pooler hands server connections from client to
// client between transactions. PgBouncer reuses the most recently released server connection first
// (LIFO, server_round_robin = 0), so the second client normally lands on the first one's server.
// Seeing the mark is proof; not seeing it in every round is strong evidence only, which is why
// DATABASE_POOLER=transaction exists and why a lost named statement is also caught at run time.

export interface CheckClient {
  connect(): Promise<unknown>;
  query(text: string, params?: unknown[]): Promise<{ rows: Record<string, unknown>[] }>;
  on(event: 'error', listener: (err: Error) => void): unknown;
  end(): Promise<void>;
}

const ROUNDS = 3;
const SETTING = 'pooler_check.mark';

export async function detectTransactionPooler(makeClient: () => CheckClient): Promise<boolean> {
  const clients = [makeClient(), makeClient()] as const;
  for (const client of clients) client.on('error', () => {}); // failures surface through query()
  try {
    await Promise.all(clients.map((c) => c.connect()));
    for (let round = 0; round < ROUNDS; round++) {
      const [writer, reader] = round % 2 === 0 ? clients : [clients[1], clients[0]];
      const mark = crypto.randomUUID();
      await writer.query('SELECT set_config($1, $2, false)', [SETTING, mark]);
      const { rows } = await reader.query('SELECT current_setting($1, true) AS seen', [SETTING]);
      if (rows[0]?.seen === mark) return true;
    }
    return false;
  } finally {
    await Promise.allSettled(clients.map((c) => c.end()));
  }
}
