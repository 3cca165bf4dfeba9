package idem_test

import (
	"testing"

	"github.com/idemgen/idemgen/runtime/idemtest"
)

// TestMain stops the throwaway PostgreSQL server when the tests end.
func TestMain(m *testing.M) { idemtest.Main(m) }
