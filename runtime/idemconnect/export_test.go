package idemconnect

// RequestIDOf is requestID, for the tests.
var RequestIDOf = requestID
