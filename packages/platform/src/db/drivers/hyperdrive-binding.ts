/** What a `[[hyperdrive]]` binding gives a Worker (the field this platform reads). */
export interface HyperdriveBinding {
  readonly connectionString: string;
}

/** The binding's object, if `value` is one (a Worker's env also holds strings, KV namespaces, ...). */
export function asHyperdriveBinding(value: unknown): HyperdriveBinding | undefined {
  if (typeof value !== 'object' || value === null) return undefined;
  const { connectionString } = value as { connectionString?: unknown };
  return typeof connectionString === 'string' && connectionString !== '' ? { connectionString } : undefined;
}
