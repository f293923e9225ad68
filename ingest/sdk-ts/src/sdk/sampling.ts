/**
 * Sampling by interaction: the same CRC-32 rule as the Python SDK (`zlib.crc32` of the UTF-8
 * id below `rate * 2**32`), so the stream sees all of an interaction's events or none, whichever
 * SDK emitted them.
 */

const TABLE = (() => {
  const table = new Uint32Array(256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    table[n] = c >>> 0;
  }
  return table;
})();
const encoder = new TextEncoder();

export function crc32(text: string): number {
  let crc = 0xffffffff;
  for (const byte of encoder.encode(text)) {
    crc = (TABLE[(crc ^ byte) & 0xff] as number) ^ (crc >>> 8);
  }
  return (crc ^ 0xffffffff) >>> 0;
}

export function keepsInteraction(interactionId: string, sampleRate: number): boolean {
  if (sampleRate >= 1) return true;
  return crc32(interactionId) < sampleRate * 2 ** 32;
}
