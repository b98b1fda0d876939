// A js-libp2p node that meets a persona's py-libp2p node (tests/integration/test_mesh_js_interop.py): another
// implementation of libp2p (TCP, Noise, yamux, identify, gossipsub /meshsub/1.1.0) and of the persona's mesh protocol
// written independently of anima's Python: its own Ed25519 key (node:crypto) and did:key, RFC 8785 canonical JSON,
// signed containers, and the signed `have` that binds its libp2p peer to its DID.
//
//   node peer.mjs --dial <multiaddr of the persona> --to <the persona's DID> --text <words>
//
// It prints one JSON line per event on stdout: ready, connected, subscribed (the persona's topics as gossipsub
// reports them), published (its container), have (the persona's, its binding verified here) and container (a signed
// container from the persona, its id and signature verified here). It stops on SIGINT/SIGTERM or after 120 s.

import './node20.mjs' // first: what libp2p's dependencies use of Node 22 (Promise.withResolvers), on Node 20
import { createHash, generateKeyPairSync, sign, verify, createPublicKey, randomBytes } from 'node:crypto'
import { createLibp2p } from 'libp2p'
import { tcp } from '@libp2p/tcp'
import { noise } from '@chainsafe/libp2p-noise'
import { yamux } from '@chainsafe/libp2p-yamux'
import { identify } from '@libp2p/identify'
import { gossipsub } from '@chainsafe/libp2p-gossipsub'
import { multiaddr } from '@multiformats/multiaddr'
import { base58btc } from 'multiformats/bases/base58'

const ALL = 'anima/all'
const SYNC = 'anima/sync'
const args = Object.fromEntries(process.argv.slice(2).reduce((pairs, word, i, all) =>
  word.startsWith('--') ? [...pairs, [word.slice(2), all[i + 1]]] : pairs, []))
const say = (event) => process.stdout.write(JSON.stringify(event) + '\n')

// ---- the persona's mesh protocol, from its documentation (docs/mesh.md), not from its code ----------------------
// RFC 8785: keys sorted by UTF-16 code units, numbers and strings as ECMAScript serialises them
const canonical = (value) => {
  if (value === null || typeof value !== 'object') return JSON.stringify(value)
  if (Array.isArray(value)) return '[' + value.map(canonical).join(',') + ']'
  return '{' + Object.keys(value).sort().map((k) => JSON.stringify(k) + ':' + canonical(value[k])).join(',') + '}'
}
const ED25519_SPKI = Buffer.from('302a300506032b6570032100', 'hex') // the DER prefix of a raw Ed25519 public key
const didOf = (raw) => 'did:key:' + base58btc.encode(Buffer.concat([Buffer.from([0xed, 0x01]), raw]))
const keyOf = (did) => {
  const decoded = Buffer.from(base58btc.decode(did.slice('did:key:'.length)))
  if (decoded.length !== 34 || decoded[0] !== 0xed || decoded[1] !== 0x01) throw new Error('not an Ed25519 did:key')
  return createPublicKey({ key: Buffer.concat([ED25519_SPKI, decoded.subarray(2)]), format: 'der', type: 'spki' })
}
const b64url = (bytes) => Buffer.from(bytes).toString('base64url')

const { publicKey, privateKey } = generateKeyPairSync('ed25519')
const raw = publicKey.export({ format: 'der', type: 'spki' }).subarray(ED25519_SPKI.length)
const did = didOf(raw)
const BODY = ['v', 'type', 'sender', 'ts', 'ttl', 'nonce', 'recipient', 'topic', 'lineage', 'payload']

function seal (type, payload, recipient) {
  const body = { v: 1, type, sender: did, ts: Date.now(), ttl: 3600, nonce: randomBytes(8).toString('hex'),
    recipient: recipient ?? null, topic: null, lineage: [], payload }
  const bytes = Buffer.from(canonical(body))
  return { ...body, id: 'sha256:' + createHash('sha256').update(bytes).digest('hex'), sig: b64url(sign(null, bytes, privateKey)) }
}

function checked (container) {
  const body = Object.fromEntries(BODY.map((k) => [k, container[k]]))
  const bytes = Buffer.from(canonical(body))
  const id = 'sha256:' + createHash('sha256').update(bytes).digest('hex')
  const signature = Buffer.from(container.sig, 'base64url')
  return id === container.id && verify(null, bytes, keyOf(container.sender), signature)
}

function binding (peer) { // "this libp2p peer is this DID", signed by the DID's key (a `have`)
  const ts = Date.now()
  const bytes = Buffer.from(canonical({ did, peer, ts }))
  return { did, peer, ts, sig: sign(null, bytes, privateKey).toString('hex') }
}

function bound (have, from) {
  const bytes = Buffer.from(canonical({ did: have.did, peer: have.peer, ts: have.ts }))
  return have.peer === from && verify(null, bytes, keyOf(have.did), Buffer.from(have.sig, 'hex'))
}

const container = seal('message', { text: args.text }, args.to)
const seen = new Set([container.id]) // what we hold: never asked for, never reported as received

// ---- the libp2p node ----------------------------------------------------------------------------------------------
const node = await createLibp2p({
  addresses: { listen: ['/ip4/127.0.0.1/tcp/0'] },
  transports: [tcp()],
  connectionEncrypters: [noise()],
  streamMuxers: [yamux()],
  services: {
    identify: identify(),
    pubsub: gossipsub({ allowPublishToZeroTopicPeers: true, emitSelf: false, heartbeatInterval: 1000 })
  }
})
const me = node.peerId.toString()
say({ event: 'ready', peer: me, did, addrs: node.getMultiaddrs().map(String) })
const pubsub = node.services.pubsub
pubsub.addEventListener('message', (evt) => {
  const { topic, data } = evt.detail
  const from = evt.detail.from?.toString()
  let value
  try { value = JSON.parse(Buffer.from(data).toString('utf8')) } catch { return }
  if (topic === SYNC && value.kind === 'have' && !seen.has('have:' + value.did)) {
    seen.add('have:' + value.did)
    say({ event: 'have', did: value.did, from, verified: bound(value, from), ids: value.ids.length })
  } else if (topic !== SYNC && value && typeof value === 'object' && value.sender && !seen.has(value.id)) {
    seen.add(value.id)
    say({ event: 'container', type: value.type, sender: value.sender, id: value.id, verified: checked(value),
      payload: value.payload, from })
  } else if (topic === SYNC && value.kind === 'bodies' && value.to === did) {
    for (const container of value.containers) {
      if (seen.has(container.id)) continue
      seen.add(container.id)
      say({ event: 'container', type: container.type, sender: container.sender, id: container.id,
        verified: checked(container), payload: container.payload, from, via: 'sync' })
    }
  } else if (topic === SYNC && value.kind === 'want' && value.to === did && value.ids.includes(container.id)) {
    publish(SYNC, { kind: 'bodies', to: value.from, containers: [container] })
  }
  if (topic === SYNC && value.kind === 'have' && value.ids.length > 0) { // the persona holds what we lack: ask
    const missing = value.ids.filter((id) => !seen.has(id))
    if (missing.length) publish(SYNC, { kind: 'want', to: value.did, from: did, ids: missing })
  }
})
pubsub.subscribe(ALL)
pubsub.subscribe(SYNC)

async function publish (topic, message) {
  try {
    await pubsub.publish(topic, Buffer.from(JSON.stringify(message)))
    return true
  } catch (error) {
    say({ event: 'error', detail: String(error) })
    return false
  }
}

await node.dial(multiaddr(args.dial))
say({ event: 'connected', to: args.dial })

// wait until gossipsub knows the persona's subscriptions (its RPC after the stream opens), then speak
const persona = args.dial.split('/p2p/')[1]
for (let i = 0; i < 100 && !pubsub.getSubscribers(ALL).map(String).includes(persona); i++) {
  await new Promise((resolve) => setTimeout(resolve, 200))
}
say({ event: 'subscribed', topics: pubsub.getTopics(), persona_on_all: pubsub.getSubscribers(ALL).map(String).includes(persona) })
const timer = setInterval(async () => { // a signed `have` every second (the persona binds us by it); our message
  await publish(SYNC, { kind: 'have', ...binding(me), ids: [container.id], prefer: [], limits: { rate: 5.0, burst: 40 } })
}, 1000)
await new Promise((resolve) => setTimeout(resolve, 1500)) // the mesh grafts on heartbeats
if (await publish(ALL, container)) say({ event: 'published', id: container.id, did })

const stop = async () => { clearInterval(timer); await node.stop(); process.exit(0) }
process.on('SIGINT', stop)
process.on('SIGTERM', stop)
setTimeout(stop, 120_000)
