import pg from 'pg';
import type { Cluster } from './postgres.js';

let counter = 0;

/** The run's migrated database on the shared cluster, made by migrated-template.ts, to copy. */
export const MIGRATED_TEMPLATE = 'migrated_template';

/** A fresh, empty database on the cluster: tests share a cluster but never each other's data. */
export async function freshDatabase(cluster: Cluster, prefix = 'test'): Promise<string> {
  counter += 1;
  const name = `${prefix}_${process.pid}_${counter}`;
  await cluster.query(`CREATE DATABASE ${name}`);
  return cluster.url(name);
}

/**
 * A fresh database with every migration applied, copied from the run's template (global-setup.ts): for
 * a file on the shared cluster whose servers need a migrated database and that is not about migrating.
 */
export async function migratedDatabase(cluster: Cluster, prefix = 'migrated'): Promise<string> {
  counter += 1;
  const name = `${prefix}_${process.pid}_${counter}`;
  await cluster.query(`CREATE DATABASE ${name} TEMPLATE ${MIGRATED_TEMPLATE}`);
  return cluster.url(name);
}

export interface OwnedDatabase {
  /** The owner's URL: a login role that is not a superuser, as a managed Postgres hands out. */
  url: string;
  role: string;
  name: string;
  /** Runs one statement as the superuser in this database (to take a privilege away, or give it back). */
  asSuperuser(statement: string): Promise<void>;
}

/** A fresh database owned by a fresh login role that is not a superuser. */
export async function ownedDatabase(cluster: Cluster, prefix = 'owned'): Promise<OwnedDatabase> {
  counter += 1;
  const role = `${prefix}_role_${process.pid}_${counter}`;
  const name = `${prefix}_${process.pid}_${counter}`;
  await cluster.query(`CREATE ROLE ${role} LOGIN NOSUPERUSER`);
  await cluster.query(`CREATE DATABASE ${name} OWNER ${role}`);
  return {
    url: `postgres://${role}@127.0.0.1:${cluster.port}/${name}`,
    role,
    name,
    async asSuperuser(statement) {
      const client = new pg.Client(cluster.url(name));
      await client.connect();
      try {
        await client.query(statement);
      } finally {
        await client.end();
      }
    },
  };
}

/** The same database reached through the local Neon proxy, which ignores the URL's host. */
export function neonUrl(url: string): string {
  const u = new URL(url);
  u.host = 'db.neon.invalid';
  return u.toString();
}
