package idem_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/idemgen/idemgen/runtime/idem"
)

type text string

func (t text) MarshalText() ([]byte, error) {
	if t == "bad" {
		return nil, errors.New("no text")
	}
	return []byte(t), nil
}

func textSum(v text) []byte {
	f := idem.NewFingerprinter("m")
	f.Text(v)
	return f.Sum()
}

// TestFingerprinterText: equal text fingerprints equal, different text
// differs, and a value whose MarshalText fails matches nothing, not even
// itself.
func TestFingerprinterText(t *testing.T) {
	assert.Equal(t, textSum("a"), textSum("a"))
	assert.NotEqual(t, textSum("a"), textSum("b"))
	assert.NotEqual(t, textSum("bad"), textSum("bad"))
	f := idem.NewFingerprinter("m")
	f.String("a")
	assert.NotEqual(t, f.Sum(), textSum("a"), "text is tagged apart from a string")
}
