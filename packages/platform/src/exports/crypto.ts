// Web Crypto helpers for what an app keeps secret or compares by hash: sealed tokens, hashed keys.
export * from '../util/base64.js';
export * from '../util/secret-box.js';
export * from '../util/sha256.js';
