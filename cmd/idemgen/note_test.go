package main

import (
	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/internal/testmod"
)

// TestNoMismatchNote: a method whose generated tests cannot derive another
// request gets a note at its directive when it is generated.
func TestNoMismatchNote(t *testing.T) {
	dir := testmod.New(t, "note", map[string][]byte{
		"svc/svc.go": []byte(`package svc

import "context"

// Svc is a service.
type Svc struct{}

// Do takes a slice only.
//
//go:generate idemgen
func (s *Svc) Do(ctx context.Context, tags []string) error { return nil }
`),
		"svc/svc_test.go": []byte(`package svc

import (
	"testing"

	"github.com/idemgen/idemgen/runtime/idemtest"
)

func newSvcForTest(t *testing.T, db *idemtest.DB) *Svc { return &Svc{} }

func sampleSvcDoArgs(t *testing.T) (tags []string) { return []string{"a"} }
`),
	})
	t.Chdir(dir)
	t.Setenv("GOFILE", "")
	var out, errb bytes.Buffer
	require.Equal(t, 0, run(context.Background(), []string{"./..."}, &out, &errb), errb.String())
	assert.Equal(t, "svc/svc.go:10:1: note: Svc.Do: no mismatch test: the generated tests vary one fingerprinted number, string or bool reached through the arguments' struct fields to make another request, and there is none (fingerprinted: tags[]); to test it, add to a _test.go file\n"+
		"\tfunc otherSvcDoArgs(t *testing.T) (tags []string)\n"+
		"which returns another valid request for Svc.Do, one whose fingerprint differs from the sample's (the mismatch test sends it under the sample's key)\n"+
		"svc/svc.go:10:1: hint: the generated tests count executions; to count each method's effects too (rows, calls to a fake), add to a _test.go file of package svc\n"+
		"\tfunc countSvcDoEffects(t *testing.T, db *idemtest.DB) int\n", errb.String())
}
