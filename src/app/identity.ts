import type { AppIdentity } from '@honest-health/platform';

/**
 * The names operators know the service by: metrics `honest_health_*`, `application_name`
 * `honest-health:<pool>`, the tracer and default service name, the embedded database's
 * `honest-health.lock`. The app's tools open the database under it too, so they and a running server
 * agree on the lock.
 */
export const identity: AppIdentity = { name: 'honest-health' };
