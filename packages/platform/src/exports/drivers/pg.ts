export { createPgDriver, type PgDriverOptions } from '../../db/drivers/pg.js';
export { type PgCompatiblePool, wrapPgCompatiblePool } from '../../db/drivers/pg-compatible.js';
export { pgDatabase } from '../../db/drivers/pg-database.js';
