// Package idemhttp is net/http middleware for the Idempotency-Key request
// header (IETF draft-ietf-httpapi-idempotency-key-header).
//
// The middleware reads the key from the header, validates it with an
// [idem.KeyPolicy], and stores it in the request context with [idem.ContextWithKey],
// together with the request's scope ([idem.ContextWithScope], e.g. the authenticated
// account, so keys never cross tenants) and an [idem.Outcome]. Handlers then
// call idemgen-generated methods with the request's context; when such a call
// replays a stored response, the middleware adds Idempotent-Replayed: true to
// the response, and every response after such a call carries
// Idempotency-Key-Retention, the seconds the key is kept ([HeaderRetention]).
//
// The header is accepted in the draft's Structured Field string form
// ("8e03978e-40d5-43e8-bc93-6894a57f9324", RFC 8941 sf-string with \" and \\
// escapes) and in the bare form many clients send
// (8e03978e-40d5-43e8-bc93-6894a57f9324).
//
// Errors follow the draft and are written as application/problem+json
// (RFC 9457):
//
//	missing key on a method that requires one     400 Bad Request
//	malformed key (bad form, too long, repeated)   400 Bad Request
//	scope function failed or returned "", or a
//	scope the ledger cannot hold                   403 Forbidden
//	key reused with a different request            422 Unprocessable Content
//	request with this key still in progress        409 Conflict + Retry-After
//	claim taken over by another attempt            409 Conflict + Retry-After
//	ledger unavailable                             503 Service Unavailable
//	call ran, its outcome could not be recorded    500 Internal Server Error
//
// The middleware writes the first three itself; handlers map the errors of
// idempotent calls with [WriteError], which answers each kind of
// [idem.Classify] from one table (the same kinds runtime/idemgrpc and
// runtime/idemconnect answer with codes). No response ever echoes the raw
// header.
//
// [Transport], for clients, retries on the schedule of runtime/idemretry,
// which the gRPC and Connect client interceptors share.
//
// The middleware is a plain func(http.Handler) http.Handler, so it wraps a
// single handler registered on an [http.ServeMux] pattern, a whole mux, or
// sits in a chi or echo (echo.WrapMiddleware) middleware chain.
package idemhttp
