package fastpath

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestPlainDirective(t *testing.T) {
	for _, tt := range []struct {
		args        []string
		verbose, ok bool
	}{
		{nil, false, true},
		{[]string{"-retention=48h", "-final-errors=ErrA,ErrB"}, false, true},
		{[]string{"-v", "-tests=false"}, true, true},
		{[]string{"--v=false"}, true, true}, // main treats any -v as set, so does this
		{[]string{"-check"}, false, false},
		{[]string{"--check=true"}, false, false},
		{[]string{"-debug-model"}, false, false},
		{[]string{"-h"}, false, false},
		{[]string{"-help"}, false, false},
		{[]string{"-"}, false, false},
		{[]string{"--"}, false, false},
		{[]string{"-table", "ledger"}, false, false}, // a value on its own: main parses it
		{[]string{"./..."}, false, false},            // a package run
	} {
		verbose, ok := plainDirective(tt.args)
		assert.Equal(t, tt.ok, ok, "%q", tt.args)
		assert.Equal(t, tt.verbose, verbose, "%q", tt.args)
	}
}
