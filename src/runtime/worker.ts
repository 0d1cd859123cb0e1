import { honestHealth } from '../app/module.js';
import { createIsolateHandlers } from '../platform/lifecycle/isolate.js';

const { fetch, scheduled } = createIsolateHandlers(honestHealth);

export default { fetch, scheduled };
