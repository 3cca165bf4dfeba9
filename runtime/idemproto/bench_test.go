package idemproto_test

import (
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/idemproto"
	"github.com/idemgen/idemgen/runtime/idemproto/testpb"
)

// BenchmarkFingerprint hashes a message with a field of every kind, as a
// wrapper does once per call.
func BenchmarkFingerprint(b *testing.B) {
	m := random(3, 50)
	var big *testpb.Everything
	for _, c := range m {
		if big == nil || proto.Size(c) > proto.Size(big) {
			big = c
		}
	}
	b.Logf("%d bytes on the wire", proto.Size(big))
	for b.Loop() {
		f := idem.NewFingerprinter("T.M")
		idemproto.Fingerprint(f, big)
		f.Sum()
	}
}

// BenchmarkCodec stores and reads back the same message, as a first call
// does.
func BenchmarkCodec(b *testing.B) {
	m := random(3, 1)[0]
	for b.Loop() {
		raw, err := idemproto.Encode(m)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := idemproto.Decode[*testpb.Everything](raw); err != nil {
			b.Fatal(err)
		}
	}
}
