package gen

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestWithoutInputsStamp(t *testing.T) {
	a := []byte(Header + "\n// idemgen-inputs: sha256:aaaa\n// idemgen-outputs: sha256:cccc x.go\n\npackage p\n")
	b := []byte(Header + "\n// idemgen-inputs: sha256:bbbb\n// idemgen-outputs: sha256:cccc x.go\n\npackage p\n")
	c := []byte(Header + "\n// idemgen-inputs: sha256:bbbb\n// idemgen-outputs: sha256:dddd x.go\n\npackage p\n")
	assert.Equal(t, WithoutInputsStamp(a), WithoutInputsStamp(b), "only the inputs stamp differs: not stale")
	assert.NotEqual(t, WithoutInputsStamp(a), WithoutInputsStamp(c), "the outputs stamp is content")
	body := []byte("package p\n// idemgen-inputs: sha256:aaaa in a body is kept\n")
	assert.Equal(t, body, WithoutInputsStamp(body))
}
