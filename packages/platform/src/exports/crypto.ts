// `@honest-health/platform/crypto`: Web Crypto helpers for what an app keeps secret or compares by
// hash: sealed tokens, hashed keys.
export { decodeBase64, encodeBase64, encodeBase64Url } from '../util/base64.js';
export {
  createSecretBox,
  generateKeyBase64,
  type SecretBox,
  SecretBoxOpenError,
} from '../util/secret-box.js';
export { sha256Hex } from '../util/sha256.js';
