package grpcapi

import (
	"errors"
	"strings"
)

// account reads the caller's account from the values of the authorization
// metadata (the Authorization header over Connect): "Bearer <account>". A
// real service would verify a token here; the example trusts it, as its
// HTTP API does.
func account(vals []string) (string, error) {
	if len(vals) != 1 {
		return "", errors.New("send one authorization value: Bearer <account>")
	}
	acct, ok := strings.CutPrefix(vals[0], "Bearer ")
	if !ok || acct == "" || len(acct) > 64 {
		return "", errors.New("missing or malformed bearer token")
	}
	return acct, nil
}
