// Base64 for bytes through the web-standard btoa/atob, so Node, Bun and Workers encode alike.
// (Uint8Array.prototype.toBase64 would do it natively, but Node 22 does not have it.)

/**
 */
export function encodeBase64(bytes: Uint8Array): string {
  let binary = '';
  for (const b of bytes) binary += String.fromCharCode(b);
  return btoa(binary);
}

/** The URL- and filename-safe alphabet without padding (RFC 4648 §5), for tokens in URLs. */
export function encodeBase64Url(bytes: Uint8Array): string {
  return encodeBase64(bytes).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}

/** The bytes of standard base64 text; undefined when it is not base64. */
export function decodeBase64(text: string): Uint8Array<ArrayBuffer> | undefined {
  try {
    return Uint8Array.from(atob(text), (c) => c.charCodeAt(0));
  } catch {
    return undefined;
  }
}
