import { createErrorTail } from '@honest-health/platform/worker/error-tail';

// The errors Tail Worker (wrangler.errors.toml): it receives the app Worker's invocations once they end
// and sends their error reports and Crons check-ins to Sentry (SENTRY_DSN is its secret).
export default createErrorTail();
