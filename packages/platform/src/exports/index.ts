// `@honest-health/platform`: the module contract and what an app module is written with. Each name is
// listed, so that this file is the root's whole API; each is documented where it is declared.

export { interval } from '../db/interval.js';
export { isPoisoned, isPoolExhausted, poisonReason } from '../db/poison.js';
export type { ProcessDatabase } from '../db/process-database.js';
export {
  forbidNamedStatements,
  NAMED_STATEMENT_LOST,
  registerStatementPolicy,
  StatementNaming,
  statementName,
} from '../db/statements.js';
// The database as an app queries it: the driver seam, the poison classifier, statement naming.
export type {
  Database,
  DatabaseDriver,
  DatabasePool,
  PoolerInfo,
  PoolRole,
  PoolStats,
  QueryResult,
  Row,
  SqlSession,
} from '../db/types.js';
export { declareAnswerHeader, jsonAnswer, setAnswerHeader } from '../http/answer-headers.js';
export { BodyBudget, type BodyLimitsOptions, limitBodies } from '../http/body-budget.js';
export { errorBody, type FieldError } from '../http/error-body.js';
export { Hono } from '../http/hono.js';
// The module contract: what an app supplies, and what its routes find in the context.
export type {
  AppContext,
  AppEnv,
  AppInstance,
  AppMetrics,
  AppMetricsContext,
  AppModule,
  AppRegistry,
  AppTick,
  ProcessAppModule,
  RequestScope,
} from '../http/module.js';
export type { TickRun } from '../jobs/tick.js';
// Metrics: the registry an app's gauges and counters are declared on.
export {
  type Collect,
  type Counter,
  type GaugeRegistry,
  type GaugeSample,
  type Histogram,
  type Labels,
  type MetricDefinition,
  type MetricsRegistry,
  PROMETHEUS_CONTENT_TYPE,
} from '../metrics/registry.js';
// Configuration: the platform's variables, and the parsing an app's own `loadConfig` uses.
export {
  CLIENT_IP_HEADERS,
  type ClientIpHeader,
  type Config,
  ConfigError,
  DATABASE_DRIVERS,
  DATABASE_POOLERS,
  type DatabaseConfig,
  type DatabasePooler,
  DEFAULT_PGLITE_DIR,
  type DeprecatedVariable,
  defaultBindHost,
  type Env,
  int,
  loadAll,
  loadConfig,
  type NetworkDriver,
  parseEnv,
  type RenamedVariables,
  renameVariables,
} from '../util/config.js';
export {
  causeChain,
  errorCode,
  type Links,
  rootCause,
  viaAnyWrapper,
  viaCause,
  type WalkOptions,
} from '../util/error-chain.js';
export {
  type AppIdentity,
  DEFAULT_IDENTITY,
  DEFAULT_NAME,
  type Identity,
  lockFileOf,
  resolveIdentity,
} from '../util/identity.js';
// Logging, and the error chains log lines and error codes are read from.
export {
  createLogger,
  describeError,
  type ErrorSummary,
  type LogFields,
  type Logger,
  type LogLevel,
  type LogSink,
  type PoisonClassifier,
  redactParams,
  sqlstateOf,
} from '../util/log.js';
export { TimeoutError, withTimeout } from '../util/timeout.js';
export { hotSchema, useSchemaCompiler, validate } from '../util/validate.js';
