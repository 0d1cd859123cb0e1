export { createHyperdriveDriver, type HyperdriveDriverOptions } from '../../db/drivers/hyperdrive.js';
export { hyperdriveIsolateDatabase } from '../../runtimes/worker-hyperdrive.js';
