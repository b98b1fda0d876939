"""HMP's mesh primitives, pure (no persona, no database, no network): a persona's Ed25519 identity and its
`did:key` (identity.py), signed immutable containers over RFC 8785 canonical JSON (containers.py), and a per-peer
token bucket (limits.py). The managers keep the rules; the mesh door (mesh/) moves the bytes."""
