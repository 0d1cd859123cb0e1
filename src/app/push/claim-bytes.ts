/**
 * The invoice bytes (their JSON text) one claim returns by default: well under neon-http's 10 MB answer,
 * with room for the JSON escaping of that text. PUSH_CLAIM_MAX_PAYLOAD_BYTES sets it.
 */
export const DEFAULT_CLAIM_PAYLOAD_BYTES = 4 * 1024 * 1024;
