package idem_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/idem"
)

// list is a recursive type written the way generated helpers write one.
type list struct {
	n    int
	next *list
	kids []list
}

func writeList(f *idem.Fingerprinter, v list) {
	f.Int(int64(v.n))
	if v.next == nil {
		f.Nil()
	} else {
		f.Ptr()
		if f.Enter(v.next) {
			writeList(f, *v.next)
			f.Leave()
		}
	}
	if v.kids == nil {
		f.Nil()
	} else {
		f.Len(len(v.kids))
		if f.Enter(v.kids) {
			for _, k := range v.kids {
				writeList(f, k)
			}
			f.Leave()
		}
	}
}

func sum(v list) []byte {
	f := idem.NewFingerprinter("m")
	writeList(f, v)
	return f.Sum()
}

// TestFingerprinterEnter: a cyclic value gets a back reference and a
// fingerprint of its shape; an acyclic one is written as without Enter.
func TestFingerprinterEnter(t *testing.T) {
	a := &list{n: 1}
	a.next = &list{n: 2, next: a}
	require.Equal(t, sum(*a), sum(*a), "one cyclic value, two fingerprints")

	b := &list{n: 1}
	b.next = &list{n: 2, next: b}
	assert.Equal(t, sum(*a), sum(*b), "two cycles of one shape")

	c := &list{n: 1}
	c.next = &list{n: 3, next: c}
	assert.NotEqual(t, sum(*a), sum(*c), "cycles through different values")

	unrolled := &list{n: 1, next: &list{n: 2, next: &list{n: 1}}}
	assert.NotEqual(t, sum(*a), sum(*unrolled), "a cycle and an acyclic value")

	s := list{n: 4, kids: make([]list, 1)}
	s.kids[0] = list{n: 5}
	s.kids[0].kids = s.kids // the slice holds itself
	require.Equal(t, sum(s), sum(s))

	// Acyclic, with one value reached twice: the encoding without Enter.
	shared := &list{n: 9}
	v := list{n: 1, next: shared, kids: []list{{n: 2, next: shared}}}
	f := idem.NewFingerprinter("m")
	f.Int(1)
	f.Ptr()
	f.Int(9)
	f.Nil()
	f.Nil()
	f.Len(1)
	f.Int(2)
	f.Ptr()
	f.Int(9)
	f.Nil()
	f.Nil()
	f.Nil()
	assert.Equal(t, f.Sum(), sum(v))
}
