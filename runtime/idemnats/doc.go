// Package idemnats consumes NATS JetStream messages through idemgen's
// generated wrappers: a message delivered twice has one effect. It is a
// module of its own, so services without NATS never see nats.go among their
// requirements.
//
// [NewHandler] takes a generated wrapper's method (generic over its request
// and response types) and returns a [Handler] whose [Handler.Func] is a
// jetstream.MessageHandler for Consume. For each message it:
//
//   - decodes the request ([Config.Decode], JSON by default); a message that
//     cannot be decoded is poison: terminated (Term) and reported, never
//     delivered again;
//   - picks the key from the first source the message has, in the order of
//     [Config.Keys] ([DefaultKeys]: the request field a wrapper generated
//     with -key names, then the Nats-Msg-Id header, then the stream and
//     sequence). The wrapper knows whether it has a -key field: the handler
//     puts the header's or the sequence's key in the context as a fallback
//     (idem.ContextWithFallbackKey), which the field replaces, so a wrapper
//     with -key is keyed by its field whatever message ID the publisher
//     chose, and nothing restates the field in the Config;
//   - puts the scope in the context ([Config.Scope], by default the stream's
//     and the consumer's names, [DefaultScope]);
//   - calls the wrapper and settles the message from its answer.
//
// The answer decides the action:
//
//	success, replay, a final error stored or replayed       Ack
//	idem.ErrInProgress (another delivery runs the key)      NakWithDelay(RetryAfter)
//	idem.ErrLockLost                                        NakWithDelay(1s)
//	idem.ErrStore, any other error                          NakWithDelay(backoff)
//	idem.ErrMismatch, an invalid key or scope, an outcome
//	not recorded, a request that cannot be decoded          Term, reported
//	(no call) a copy of a message the handler still runs    InProgress
//
// [Config.Concurrency] runs up to that many calls at once (Func's function
// then takes each message at once and sends InProgress every
// [Config.Progress] while it waits for its turn and while its call runs, so
// a waiting message is not delivered again); [Handler.Wait] waits for them.
//
// A redelivery carries the same key (the header and the stream sequence are
// stored with the message; the request field is in its data), so a message
// whose ack was lost after its call committed is answered from the ledger:
// the method does not run again. What a key from each source dedupes, and
// what it does not (a producer that publishes one event twice under two
// message IDs), is in docs/messaging.md.
package idemnats
