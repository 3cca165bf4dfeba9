// Package testpb holds the messages the tests of runtime/idemproto and the
// type matrix (internal/matrix) use: a field of every kind, and one
// message in three versions for the compatibility rules. It is not part of
// idemproto's API.
package testpb

//go:generate protoc -I proto -I /usr/include --go_out=. --go_opt=module=github.com/idemgen/idemgen/runtime/idemproto/testpb proto/testpb.proto
