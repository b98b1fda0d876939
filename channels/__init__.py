"""Channels: the doors through which the persona's humans reach it where they are (Matrix, Telegram, e-mail).

A channel owns its transport only: it fetches what arrived (`Incoming`, data with its origin) and sends what the
outbox hands it (`Outgoing`). Who the sender is, whether the message becomes a note or a contact request, the
deduplication by platform id and the outbox's idempotency live in the managers (people, channels).
"""
