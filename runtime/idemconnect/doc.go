// Package idemconnect makes connect-go (connectrpc.com/connect) unary
// handlers idempotent with idemgen's generated wrappers, and gives Connect
// clients one idempotency key per intention. It is a module of its own, so
// services without Connect never see connect-go among their requirements.
//
// [NewHandlerInterceptor] reads the key from the Idempotency-Key header
// (bare or as a Structured Field string, as runtime/idemhttp reads it; over
// the gRPC protocol it is the idempotency-key metadata runtime/idemgrpc
// reads) or from an AIP-155 request_id field of the request message (a
// UUID4, the nil UUID refused); both may be sent only when they agree. It
// resolves the scope with the required [HandlerConfig.Scope] (or the
// explicit [HandlerConfig.SingleTenant]), puts key and scope in the context
// with idem.ContextWithKey and idem.ContextWithScope, and attaches an
// idem.Outcome through which the generated wrapper reports a replay: the
// response (or the error's metadata) then carries Idempotent-Replayed: true,
// and Idempotency-Key-Retention with the method's retention window in
// seconds, as runtime/idemhttp sets them.
//
// A procedure whose Spec().IdempotencyLevel is IdempotencyNoSideEffects
// (option idempotency_level = NO_SIDE_EFFECTS in its proto, or
// connect.WithIdempotency) skips the ledger: no key is read or required. A
// request without a key passes on without one, and the generated wrapper
// refuses it with idem.ErrNoKey. Streaming procedures pass through
// untouched: a stream is not one request with one response to replay.
//
// Errors of the generated wrappers become *connect.Error with the codes of
// runtime/idemgrpc, whose package doc argues each against gRPC's own code
// guidance ([Map], [Error]):
//
//	in progress (idem.ErrInProgress)     CodeAborted + RetryInfo(RetryAfter, at least 1s)
//	claim taken over (idem.ErrLockLost)  CodeAborted + RetryInfo(1s)
//	key reused, other request            CodeFailedPrecondition
//	missing or malformed key, bad request_id  CodeInvalidArgument
//	scope unknown or unusable            CodePermissionDenied
//	ledger unavailable (idem.ErrStore)   CodeUnavailable
//	outcome unknown (idem.ErrOutcomeNotRecorded)  CodeInternal
//
// [NewClientInterceptor] gives each call without a key a fresh one before
// its first attempt and retries it, with the same key, on CodeUnavailable
// and on CodeAborted with RetryInfo, within the context's deadline. Note
// that net/http itself may resend a request that carries an Idempotency-Key
// header after a failure on a reused connection: the key makes that resend
// harmless too.
package idemconnect
