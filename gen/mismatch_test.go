package gen

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/internal/testmod"
)

// TestNoMismatch: a method whose sample no generated test can turn into
// another request is marked in the model with the reason; one with a
// scalar to change is not.
func TestNoMismatch(t *testing.T) {
	dir := testmod.New(t, "nomismatch", map[string][]byte{"svc/svc.go": []byte(`package svc

import (
	"context"
	"time"
)

// Hidden has nothing fingerprinted.
type Hidden struct {
	Note string ` + "`idem:\"-\"`" + `
}

// Bag has no scalar field.
type Bag struct {
	Tags []string
	At   time.Time
}

// Svc is a service.
type Svc struct{}

// Hidden takes nothing fingerprinted.
//
//go:generate idemgen -tests=false
func (s *Svc) Hidden(ctx context.Context, h Hidden) error { return nil }

// Bag takes no scalar.
//
//go:generate idemgen -tests=false
func (s *Svc) Bag(ctx context.Context, b Bag, ids []int64) error { return nil }

// Scalar takes one.
//
//go:generate idemgen -tests=false
func (s *Svc) Scalar(ctx context.Context, n int) error { return nil }

// None takes nothing.
//
//go:generate idemgen -tests=false
func (s *Svc) None(ctx context.Context) error { return nil }
`)})
	out, err := Generate(context.Background(), Config{Dir: dir, Patterns: []string{"./..."}, Force: true})
	require.NoError(t, err)
	require.Len(t, out.Packages, 1)
	got := map[string]string{}
	for _, r := range out.Packages[0].Receivers {
		for _, m := range r.Methods {
			got[m.Name] = NoMismatch(out.Packages[0], m)
		}
	}
	assert.Equal(t, `Svc.Hidden: no mismatch test: nothing in the arguments is fingerprinted (every field is tagged idem:"-"), so every call is the same request`, got["Hidden"])
	assert.Equal(t, "Svc.Bag: no mismatch test: the generated tests vary one fingerprinted number, string or bool reached through the arguments' struct fields to make another request, and there is none (fingerprinted: b.Tags[], b.At, ids[])", got["Bag"])
	assert.Empty(t, got["Scalar"])
	assert.Empty(t, got["None"], "no arguments: no request to vary")
}
