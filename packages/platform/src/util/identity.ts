/**
 * Who the platform runs as: the names an operator sees, given by the app module (`identity`).
 *
 * @example
 * ```ts
 * export const shop: AppModule<ShopConfig> = { identity: { name: 'shop' }, ... };
 * // metrics shop_http_requests_total, ..., application_name 'shop:app', tracer and service 'shop'
 * ```
 */
export interface AppIdentity {
  /**
   * The service: OTEL_SERVICE_NAME's default and the tracer's name, Postgres' `application_name`
   * (`<name>:<pool>`), the embedded database's lock file (`<name>.lock`).
   */
  name: string;
  /**
   * Prefix of the platform's metric names (`<prefix>_http_requests_total`): by default the name with
   * each character Prometheus does not allow in a name as `_`.
   */
  metricPrefix?: string;
}

/** An identity with every name settled. */
export interface Identity {
  name: string;
  metricPrefix: string;
}

/** What an app that names nothing runs as. */
export const DEFAULT_NAME = 'app';

/**
 * Settles an app's identity: the default name, and the metric prefix derived from the name.
 *
 * @example
 * ```ts
 * resolveIdentity({ name: 'shop-api' }); // { name: 'shop-api', metricPrefix: 'shop_api' }
 * resolveIdentity(undefined); // { name: 'app', metricPrefix: 'app' }
 * ```
 */
export function resolveIdentity(identity: AppIdentity | undefined): Identity {
  const name = identity?.name || DEFAULT_NAME;
  const metricPrefix = identity?.metricPrefix ?? name.replace(/[^a-zA-Z0-9_]/g, '_').replace(/^(?=\d)/, '_');
  if (!/^[a-zA-Z_][a-zA-Z0-9_]*$/.test(metricPrefix)) {
    throw new Error(`metric prefix ${JSON.stringify(metricPrefix)} is not a Prometheus metric name`);
  }
  return { name, metricPrefix };
}

/** The identity of an app that names none: `app`. */
export const DEFAULT_IDENTITY: Identity = resolveIdentity(undefined);

/** The embedded database's lock file in its data directory. */
export const lockFileOf = (identity: Identity) => `${identity.name}.lock`;
