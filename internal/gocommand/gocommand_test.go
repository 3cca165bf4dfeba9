package gocommand

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestIdemgenArgs(t *testing.T) {
	for _, tc := range []struct {
		line string
		args []string
		ok   bool
	}{
		{"idemgen -retention=48h", []string{"-retention=48h"}, true},
		{"go tool idemgen -mode=atomic", []string{"-mode=atomic"}, true},
		{"go run github.com/idemgen/idemgen/cmd/idemgen -tests=false", []string{"-tests=false"}, true},
		{"go run -mod=mod github.com/idemgen/idemgen/cmd/idemgen@v1.2.3 -v", []string{"-v"}, true},
		{"/usr/local/bin/idemgen", []string{}, true},
		{`idemgen -final-errors "ErrA,ErrB"`, []string{"-final-errors", "ErrA,ErrB"}, true},
		{"stringer -type=Pill", nil, false},
		{"go run ./tools/other -x", nil, false},
	} {
		words, err := Split(tc.line)
		require.NoError(t, err, tc.line)
		args, ok := IdemgenArgs(words)
		assert.Equal(t, tc.ok, ok, tc.line)
		if tc.ok {
			assert.Equal(t, tc.args, args, tc.line)
		}
	}
	_, err := Split(`idemgen "unterminated`)
	assert.Error(t, err)
}
