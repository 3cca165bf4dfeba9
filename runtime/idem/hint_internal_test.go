package idem

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestReplayRateTurns pins the adaptive rule's numbers that the docs state:
// from none, ten replays in a row turn a method to lookups first; from a
// rate of 1, 44 first attempts in a row turn it back.
func TestReplayRateTurns(t *testing.T) {
	var r replayRates
	n := 0
	for ; !r.likely("m"); n++ {
		r.observe("m", true)
	}
	assert.Equal(t, 10, n, "replays in a row that turn it on")
	for range 1000 {
		r.observe("m", true)
	}
	v, _ := r.by.Load("m")
	require.EqualValues(t, replayRateOne, v.(interface{ Load() int32 }).Load(), "a storm's rate reaches 1")
	n = 0
	for ; r.likely("m"); n++ {
		r.observe("m", false)
	}
	assert.Equal(t, 44, n, "first attempts in a row that turn it off")
	assert.False(t, r.likely("other"), "a method never seen is taken for first attempts")
}

// TestReplayRatesBounded: at most maxReplayRates methods get a rate; a
// method beyond it is taken for first attempts, and concurrent observers
// share one rate per method.
func TestReplayRatesBounded(t *testing.T) {
	var r replayRates
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range maxReplayRates + 100 {
				r.observe(string(rune('a'+g%2))+string(rune(i)), true)
			}
		}()
	}
	wg.Wait()
	count := 0
	r.by.Range(func(any, any) bool { count++; return true })
	assert.Equal(t, maxReplayRates, count)
	assert.EqualValues(t, maxReplayRates, r.n.Load())
}
