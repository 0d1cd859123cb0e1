import type { Cluster } from './postgres.js';

let counter = 0;

/** A fresh, empty database on the cluster: tests share a cluster but never each other's data. */
export async function freshDatabase(cluster: Cluster, prefix = 'test'): Promise<string> {
  counter += 1;
  const name = `${prefix}_${process.pid}_${counter}`;
  await cluster.query(`CREATE DATABASE ${name}`);
  return cluster.url(name);
}
