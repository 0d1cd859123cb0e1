export { createHyperdriveDriver, type HyperdriveDriverOptions } from '../../db/drivers/hyperdrive.js';
export { hyperdriveIsolateDatabase } from '../../lifecycle/isolate-hyperdrive.js';
