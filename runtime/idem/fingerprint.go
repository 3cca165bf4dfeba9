package idem

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding"
	"encoding/binary"
	"hash"
	"math"
	"reflect"
	"time"
	"unsafe"
)

// FingerprintVersion is mixed into every fingerprint. It changes only when the
// canonical encoding below changes, which makes every stored fingerprint
// differ (a retry across such an upgrade is refused as a mismatch, never
// replayed wrongly).
const FingerprintVersion = 1

// Fingerprinter builds a request fingerprint: SHA-256 over a canonical,
// self-delimiting encoding written field by field. Generated fingerprint
// functions call it, so a reviewer can read exactly what is hashed. Every
// value is written with a one-byte type tag and, where its size varies, a
// length, so no two different requests encode to the same bytes.
type Fingerprinter struct {
	h   hash.Hash
	buf [9]byte

	// The pointers, slices and maps of recursive types being written, to
	// find a cyclic value (see Enter).
	open  []ref
	depth map[ref]int
}

// ref identifies a pointer, slice or map as encoding/json's cycle check
// does: its type, address and (for a slice) length.
type ref struct {
	t   reflect.Type
	p   unsafe.Pointer
	len int
}

// NewFingerprinter starts a fingerprint for the named method.
func NewFingerprinter(method string) *Fingerprinter {
	f := &Fingerprinter{h: sha256.New()}
	f.Uint(FingerprintVersion)
	f.String(method)
	return f
}

func (f *Fingerprinter) tag(t byte, n uint64) {
	f.buf[0] = t
	binary.BigEndian.PutUint64(f.buf[1:], n)
	f.h.Write(f.buf[:])
}

// Field writes the name of the struct field whose value follows.
func (f *Fingerprinter) Field(name string) {
	f.tag('F', uint64(len(name)))
	f.h.Write([]byte(name))
}

// String writes a string.
func (f *Fingerprinter) String(s string) {
	f.tag('s', uint64(len(s)))
	f.h.Write([]byte(s))
}

// Bytes writes a byte slice; nil and empty are different.
func (f *Fingerprinter) Bytes(b []byte) {
	if b == nil {
		f.Nil()
		return
	}
	f.tag('b', uint64(len(b)))
	f.h.Write(b)
}

// Int writes a signed integer of any size.
func (f *Fingerprinter) Int(v int64) { f.tag('i', uint64(v)) }

// Uint writes an unsigned integer of any size.
func (f *Fingerprinter) Uint(v uint64) { f.tag('u', v) }

// Float writes a float by its IEEE-754 bits (so -0 and 0 differ, and NaN is
// stable).
func (f *Fingerprinter) Float(v float64) { f.tag('f', math.Float64bits(v)) }

// Time writes the instant t names: its Unix seconds and nanoseconds. The
// zone (Location) and the monotonic clock reading are left out, so the same
// instant written in two zones fingerprints equal.
func (f *Fingerprinter) Time(t time.Time) {
	f.Int(t.Unix())
	f.Int(int64(t.Nanosecond()))
}

// Text writes v by its text form, for another package's type whose fields
// generated code cannot read (netip.Addr): values with equal text
// fingerprint equal. When MarshalText fails, Text writes 32 random bytes
// instead, so the fingerprint matches no other request: such a call runs,
// and a retry of it is refused as a mismatch rather than answered with the
// response of a request that may differ.
func (f *Fingerprinter) Text(v encoding.TextMarshaler) {
	b, err := v.MarshalText()
	if err != nil {
		var unique [32]byte
		_, _ = rand.Read(unique[:]) // crypto/rand.Read never fails
		f.tag('E', uint64(len(unique)))
		f.h.Write(unique[:])
		return
	}
	f.tag('x', uint64(len(b)))
	f.h.Write(b)
}

// Bool writes a boolean.
func (f *Fingerprinter) Bool(v bool) {
	var n uint64
	if v {
		n = 1
	}
	f.tag('t', n)
}

// Nil writes a nil pointer, slice or map.
func (f *Fingerprinter) Nil() { f.tag('N', 0) }

// Ptr writes the marker of a non-nil pointer; the pointee follows.
func (f *Fingerprinter) Ptr() { f.tag('P', 0) }

// Len writes the length of a non-nil slice, array or map; its elements
// (map entries sorted by key) follow.
func (f *Fingerprinter) Len(n int) { f.tag('L', uint64(n)) }

// Enter starts writing the contents of v, a non-nil pointer, slice or map
// of a recursive type (generated code calls it only there). When v is
// already being written further up, the value is cyclic: Enter writes a
// back reference (how many such values up it points) instead and returns
// false, and the caller skips the contents. Otherwise it returns true and
// the caller writes the contents, then calls Leave. A value without cycles
// writes nothing here, so its fingerprint is what it would be without
// Enter; a cyclic one gets a fingerprint that depends on its shape only.
func (f *Fingerprinter) Enter(v any) bool {
	rv := reflect.ValueOf(v)
	r := ref{t: rv.Type()}
	switch rv.Kind() {
	case reflect.Pointer, reflect.Map:
		r.p = rv.UnsafePointer()
	case reflect.Slice:
		r.p, r.len = rv.UnsafePointer(), rv.Len()
	}
	if i, ok := f.depth[r]; ok {
		f.tag('R', uint64(len(f.open)-i))
		return false
	}
	if f.depth == nil {
		f.depth = map[ref]int{}
	}
	f.depth[r] = len(f.open)
	f.open = append(f.open, r)
	return true
}

// Leave ends the contents of the value the last successful Enter started.
func (f *Fingerprinter) Leave() {
	last := len(f.open) - 1
	delete(f.depth, f.open[last])
	f.open = f.open[:last]
}

// Sum returns the SHA-256 digest.
func (f *Fingerprinter) Sum() []byte { return f.h.Sum(nil) }
