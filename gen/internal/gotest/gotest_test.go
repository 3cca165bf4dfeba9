package gotest

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/idemgen/idemgen/gen/ir"
)

// TestVary: the mismatch test changes the first number, else the first
// string, else the first bool.
func TestVary(t *testing.T) {
	assert.Nil(t, vary(nil))
	s := []ir.Scalar{{Path: []string{"On"}, Kind: "bool"}, {Path: []string{"ID"}, Kind: "string"},
		{Path: []string{"Rate"}, Kind: "float"}, {Path: []string{"N"}, Kind: "int"}, {Path: []string{"M"}, Kind: "uint"}}
	assert.Equal(t, &s[3], vary(s))
	assert.Equal(t, &s[2], vary(s[:3]))
	assert.Equal(t, &s[1], vary(s[:2]))
	assert.Equal(t, &s[0], vary(s[:1]))
}
