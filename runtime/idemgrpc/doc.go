// Package idemgrpc makes gRPC unary handlers idempotent with idemgen's
// generated wrappers, and gives gRPC clients one idempotency key per
// intention. It is a module of its own, so services without gRPC never see
// grpc-go among their requirements.
//
// # Server
//
// [UnaryServerInterceptor] reads the call's key from the request metadata
// (idempotency-key, [DefaultMetadataKey], or [ServerConfig.MetadataKey]) or
// from an AIP-155 request_id field of the request message, read with
// protoreflect and validated in the format [ServerConfig.RequestID] names:
// by default a UUID4 in its 36-character form, the nil UUID refused, as
// AIP-155 asks (idem.IsUUID4); any UUID version (idem.RequestIDUUID), or any
// key the key policy accepts (idem.RequestIDKey), for a service that
// documents such a format, as AIP-155 allows. A request_id in another
// format is refused with a message that names the format this server
// requires. Both may be sent only when they name the same key. It resolves
// the scope with the required
// [ServerConfig.Scope] (or the explicit [ServerConfig.SingleTenant]), puts
// key and scope in the context with idem.ContextWithKey and
// idem.ContextWithScope, and attaches an idem.Outcome, through which the
// generated wrapper reports a replay: the interceptor then sets the response
// header metadata idempotent-replayed: true ([MetadataReplayed]), and
// idempotency-key-retention ([MetadataRetention]) with the called method's
// retention window in seconds, as runtime/idemhttp does over HTTP.
//
// A call without a key passes on without one: gRPC has no request method
// that tells a mutation from a read, so the generated wrapper, which knows
// the method is idempotent, refuses it with idem.ErrNoKey. A method declared
// option idempotency_level = NO_SIDE_EFFECTS in its proto passes through
// untouched ([NoSideEffects]). Streaming RPCs are not intercepted at all:
// there is no stream interceptor, a stream is not one request with one
// response to store and replay.
//
// # Codes
//
// Errors of the generated wrappers returned by the handler (wrapped or
// not) become these statuses ([Map], [Status], [Error]), one per kind of
// idem.Classify; the application's own errors and statuses pass unchanged.
// Each carries a google.rpc.ErrorInfo whose domain is idem.ErrorDomain
// ("github.com/idemgen/idemgen") and whose reason names the kind, so a
// client tells it from the service's own status with the same code
// ([ErrorReason]); its metadata is empty (never the key, the scope or a
// fingerprint). gRPC's guidance (codes package):
// Unavailable is a transient condition corrected by retrying the same call
// with a backoff; Aborted is a concurrency conflict to retry "at a higher
// level"; FailedPrecondition is a state the system is not in, "do not retry
// until the state has been explicitly fixed"; InvalidArgument is wrong
// whatever the state.
//
//	in progress (idem.ErrInProgress)   Aborted + RetryInfo(RetryAfter, at least 1s)  IDEMPOTENCY_KEY_IN_PROGRESS
//	claim taken over (idem.ErrLockLost)  Aborted + RetryInfo(1s)  IDEMPOTENCY_LOCK_LOST
//	key reused, other request (idem.ErrMismatch)  FailedPrecondition  IDEMPOTENCY_KEY_REUSED
//	missing key (idem.ErrNoKey)          InvalidArgument      IDEMPOTENCY_KEY_MISSING
//	malformed key, bad request_id        InvalidArgument      IDEMPOTENCY_KEY_INVALID
//	scope unknown or unusable            PermissionDenied     IDEMPOTENCY_SCOPE_UNKNOWN
//	ledger unavailable (idem.ErrStore)   Unavailable          IDEMPOTENCY_LEDGER_UNAVAILABLE
//	outcome unknown (idem.ErrOutcomeNotRecorded)  Internal    IDEMPOTENCY_OUTCOME_UNKNOWN
//
// In progress is Aborted, not Unavailable: a twin holds the key, which is a
// concurrency conflict, and the server is healthy. Unavailable would be
// retried at once by every retryPolicy that lists it (nearly all do),
// ignoring the RetryInfo delay, and would count as an outage.
// Aborted is retried by no default policy; the "higher level" that retries
// it is the client's intention, with the same key, after the delay the
// RetryInfo carries: this package's client interceptor does that.
//
// A mismatch is FailedPrecondition: the request is valid (InvalidArgument
// would say it never could succeed), but the key is in a state (used by
// another request) that no retry of this call changes; only a new key, or the
// key's retention running out, does. AlreadyExists was rejected: it tells the
// client the entity it creates exists, which is false here and would read as
// success. Services answer FailedPrecondition for their own reasons too (a
// declined card): the ErrorInfo reason IDEMPOTENCY_KEY_REUSED is what tells
// a reused key apart.
//
// A missing or malformed key is InvalidArgument: wrong whatever the state.
// A scope that cannot be determined is PermissionDenied, as idemhttp's 403:
// authentication runs before this interceptor, and a caller it let through
// without a tenant may not use keys.
//
// A ledger that cannot be reached is Unavailable: the store fails closed, so
// the method did not run (or its outcome was not stored and its claim frees
// itself); the same call, same key, is to be retried with a backoff.
//
// An outcome that could not be recorded is Internal: the method ran, its
// effect is unknown, and every retry of the key replays this answer, so it
// must not be a code any retry policy retries. DataLoss was rejected: nothing
// stored was lost or corrupted.
//
// # Client
//
// [UnaryClientInterceptor] gives each call without a key a fresh one before
// its first attempt and retries it, with the same key, within the call's
// deadline, on errors that are not statuses (the exchange broke before an
// answer: grpc-go's "max retries exhausted: … EOF" when a retryPolicy's
// attempts all met a connection dropped between the stream's opening and
// its message), on Unavailable, and on Aborted with RetryInfo; never on
// another status, Unknown included (a handler's own error), so an answer is
// never retried, and every retry stays within MaxAttempts. A retry with the
// same key cannot add an effect: the ledger answers it. The schedule is
// runtime/idemretry's, shared with idemhttp.Transport and runtime/idemconnect.
// It composes with
// the attempts made below it: the key is in the call's outgoing metadata,
// which grpc-go sends on every attempt of a service config's retryPolicy and
// on its transparent retries, so the server sees one intention however many
// copies arrive. The same holds for hedging done below the interceptor (an
// interceptor chained after it, or a proxy). grpc-go itself (as of v1.85)
// does not carry out a hedgingPolicy: its service config parser ignores one.
package idemgrpc
