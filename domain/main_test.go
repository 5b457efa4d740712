package domain_test

import (
	"testing"

	"go.uber.org/goleak"
)

// The domain starts no goroutines; any leak is a bug.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
