// Verifies the signature of the agent card at a URL with @a2a-js/sdk 1.3.0's
// own check, for writ's tests: the card as served (its JSON), verified by the
// SDK's verifyAgentCardSignature (JWS over the JCS form of the card without
// its signatures, A2A §8.4) with the key its protected header names: kid,
// looked up in the JWKS its jku names.
//
// Not through the SDK's DefaultAgentCardResolver: it hands back a card with
// security schemes as a protobuf-shaped object, which the SDK's own
// canonicalizeAgentCard reads as JSON again and so loses the schemes (their
// oneof), and no card with security schemes verifies that way.
//
//   node card-verify.mjs --url BASE [--path .well-known/agent-card.json] [--token JWT]
//   node card-verify.mjs --file CARD.json
//
// --file verifies a card a test took from an answer (an extended card, a
// directory entry).
//
// The card is fetched with the bearer token when one is given (writ serves a
// card to callers who may see the agent); the JWKS without.
//
// Prints one JSON line: {"verified":true,"kid":...,"jku":...,"name":...} and
// exits 0, or {"verified":false,"error":...} and exits 1.

import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { verifyAgentCardSignature } from '@a2a-js/sdk';
import { bearerFetch } from './client-base.mjs';

// stdout carries the result line only: the SDK's debug output goes to stderr.
console.log = console.info = console.debug = (...a) => console.error(...a);

const { values: args } = parseArgs({
  options: {
    url: { type: 'string' },
    path: { type: 'string' },
    token: { type: 'string', default: '' },
    file: { type: 'string' },
  },
});

const used = {};
const verify = verifyAgentCardSignature(async (kid, jku) => {
  if (!jku) throw new Error('the signature names no jku');
  const res = await fetch(jku);
  if (!res.ok) throw new Error(`jku ${jku}: HTTP ${res.status}`);
  const set = await res.json();
  const key = (set.keys || []).find((k) => k.kid === kid);
  if (!key) throw new Error(`jku ${jku} has no key ${kid}`);
  Object.assign(used, { kid, jku });
  return key;
});

try {
  let card;
  if (args.file) {
    card = JSON.parse(readFileSync(args.file, 'utf8'));
  } else {
    const url = new URL(args.path ?? '.well-known/agent-card.json', args.url);
    const res = await bearerFetch(args.token)(url);
    if (!res.ok) throw new Error(`GET ${url}: HTTP ${res.status}`);
    card = await res.json();
  }
  await verify(card);
  process.stdout.write(JSON.stringify({ verified: true, ...used, name: card.name }) + '\n');
} catch (e) {
  process.stdout.write(JSON.stringify({ verified: false, error: String(e?.message ?? e) }) + '\n');
  process.exit(1);
}
