// Package idemconnect makes connect-go (connectrpc.com/connect) unary
// handlers idempotent with idemgen's generated wrappers, and gives Connect
// clients one idempotency key per intention. It is a module of its own, so
// services without Connect never see connect-go among their requirements.
//
// [NewHandlerInterceptor] reads the key from the Idempotency-Key header
// (bare or as a Structured Field string, as runtime/idemhttp reads it; over
// the gRPC protocol it is the idempotency-key metadata runtime/idemgrpc
// reads) or from an AIP-155 request_id field of the request message, in the
// format [HandlerConfig.RequestID] names (by default a UUID4, the nil UUID
// refused, as AIP-155 asks; idem.RequestIDUUID or idem.RequestIDKey for a
// service that documents another); a request_id in another format is
// refused with a message naming the format this server requires. Both may
// be sent only when they agree. It
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
// guidance ([Map], [Error]), one per kind of idem.Classify, each with a
// google.rpc.ErrorInfo detail (domain idem.ErrorDomain, the reason below,
// no metadata) that tells it from the service's own error with the same
// code ([ErrorReason]):
//
//	in progress (idem.ErrInProgress)     CodeAborted + RetryInfo(RetryAfter, at least 1s)  IDEMPOTENCY_KEY_IN_PROGRESS
//	claim taken over (idem.ErrLockLost)  CodeAborted + RetryInfo(1s)  IDEMPOTENCY_LOCK_LOST
//	key reused, other request            CodeFailedPrecondition  IDEMPOTENCY_KEY_REUSED
//	missing key                          CodeInvalidArgument     IDEMPOTENCY_KEY_MISSING
//	malformed key, bad request_id        CodeInvalidArgument     IDEMPOTENCY_KEY_INVALID
//	scope unknown or unusable            CodePermissionDenied    IDEMPOTENCY_SCOPE_UNKNOWN
//	ledger unavailable (idem.ErrStore)   CodeUnavailable         IDEMPOTENCY_LEDGER_UNAVAILABLE
//	outcome unknown (idem.ErrOutcomeNotRecorded)  CodeInternal   IDEMPOTENCY_OUTCOME_UNKNOWN
//
// [NewClientInterceptor] gives each call without a key a fresh one before
// its first attempt and retries it, with the same key, on failures of the
// exchange (errors the server did not send), on CodeUnavailable and on
// CodeAborted with RetryInfo, within the context's deadline, on the
// schedule of runtime/idemretry (the one idemhttp.Transport and
// runtime/idemgrpc use). Note that net/http itself may resend a request
// that carries an Idempotency-Key header after a failure on a reused
// connection: the key makes that resend harmless too.
package idemconnect
