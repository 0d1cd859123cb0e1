import { createWorkerHandlers } from '../app/edge.js';

const { fetch, scheduled } = createWorkerHandlers();

export default { fetch, scheduled };
