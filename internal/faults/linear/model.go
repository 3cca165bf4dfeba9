// Package linear checks a history of idempotent calls for linearizability
// with porcupine, as etcd's robustness tests check theirs: the fault suite
// records every call it makes (when it was invoked, when it returned, its
// key, its request's fingerprint and its answer), reads the effects at the
// end, and asks whether some order of the calls, each taking effect at one
// instant between its invocation and its return, explains every answer and
// the effects, under the model of the promise below. It is a module of its
// own, so that the example modules' lossy-proxy tests record and check their
// histories with it without the fault suite's dependencies.
//
// The model is one register per key (scope, method and key; a new
// intention under a key reused after its retention is a new key, or a new
// era of it):
//
//   - The key is free until a call commits: the first call that commits
//     sets it to its fingerprint and its answer (a value, or an error stored
//     as final, such as an outcome stored as unknown), with its effect.
//   - A call with the key's fingerprint then answers that value again (a
//     replay) and has no effect; a fresh answer (the body ran again), a
//     different value, or a replay of a free key is not linearizable,
//     unless the call's own body ran (Output.Ran): its replay may be its
//     own commit, read back after the COMMIT's outcome was unknown.
//   - A call with another fingerprint answers a mismatch while the key is
//     held, and only then.
//   - An in-progress answer is allowed while the key is free (its holder
//     has not committed), never after its answer was acknowledged.
//   - An error whose outcome the caller cannot know (a deadline, a dropped
//     connection, a lost lock, a store error) may have committed or not:
//     the call is recorded as never returning, so it may take effect at any
//     instant after its invocation, or never (after the final read). Of a
//     key's such calls with one fingerprint only the first invoked is
//     checked (partition says why the verdict is the same).
//   - The final read of the effects (Observe) must equal what the
//     linearization committed: no effect on a free key, exactly the
//     answered effect on a key that committed a value, at most one on a
//     key whose stored answer is an error or whose value no call saw.
package linear

import (
	"fmt"
	"slices"
	"strings"

	"github.com/anishathalye/porcupine"
)

// Answer is the kind of a call's answer, as the model reads it.
type Answer int

const (
	// Value is a success: the call answered Output.Value.
	Value Answer = iota
	// StoredError is an error stored as the key's final answer (named by
	// Output.Value): replayed like a value, with at most one effect.
	StoredError
	// Mismatch is the refusal of a request whose fingerprint is not the
	// key's.
	Mismatch
	// InProgress is the answer that another call holds the key.
	InProgress
	// Unknown is an error whose outcome the caller cannot know: the call
	// may have committed or not. Record such a call with Call.Lost.
	Unknown
)

// String names the answer for messages and pictures.
func (a Answer) String() string {
	switch a {
	case Value:
		return "value"
	case StoredError:
		return "stored error"
	case Mismatch:
		return "mismatch"
	case InProgress:
		return "in progress"
	case Unknown:
		return "outcome unknown"
	}
	return fmt.Sprintf("answer(%d)", int(a))
}

// Input is what a call (or the final read of the effects) asked.
type Input struct {
	// Key is the partition: scope, method and key of the call.
	Key string
	// Era counts the key's retention windows as the caller knows them: a
	// call of a later era finds the key free. Calls of one era must all
	// end before the next era's first call.
	Era int
	// Fingerprint is the request's fingerprint (any stable rendering).
	Fingerprint string
	// Observe marks the final read of the key's effects, which must follow
	// every call of the key.
	Observe bool
}

// Output is what a call answered, or what the final read found.
type Output struct {
	Answer Answer
	// Value renders the answer (a Value's response, a StoredError's
	// name), comparable with the effects' renderings.
	Value string
	// Replayed reports that the runtime answered from the stored row.
	Replayed bool
	// Ran reports that the method's body ran during the call. A replayed
	// answer of such a call may be its own commit: an attempt whose
	// COMMIT's outcome was unknown is tried again within the call, and
	// that attempt's lookup finds the row the first one committed.
	Ran bool
	// Effects are the renderings of the key's effects found at the end
	// (Observe only), sorted.
	Effects []string
}

// state is one key's register. It is comparable: porcupine compares
// states with ==.
type state struct {
	era         int
	held        bool   // a call committed
	fingerprint string // the committed call's fingerprint
	known       bool   // value is known (a call whose outcome is unknown committed an unseen one)
	value       string
	storedErr   bool // value names an error stored as the key's answer
}

// step is the model's transition: whether a call with input in could have
// answered out in state s, and the state after it.
func step(s state, in Input, out Output) (bool, state) {
	if in.Era < s.era {
		return false, s
	}
	if in.Era > s.era {
		s = state{era: in.Era} // the retention ended: the key is new
	}
	if in.Observe {
		return observe(s, out.Effects), s
	}
	mine := s.held && s.fingerprint == in.Fingerprint
	switch out.Answer {
	case Unknown:
		if !s.held {
			s.held, s.fingerprint = true, in.Fingerprint
		}
		return true, s
	case InProgress:
		return !s.held, s
	case Mismatch:
		return s.held && s.fingerprint != in.Fingerprint, s
	case Value, StoredError:
		stored := out.Answer == StoredError
		if !out.Replayed {
			if s.held {
				return false, s // the body ran again after the key committed
			}
			return true, state{era: s.era, held: true, fingerprint: in.Fingerprint, known: true, value: out.Value, storedErr: stored}
		}
		if !s.held && out.Ran {
			// Its own attempt's commit, read back by a later attempt.
			return true, state{era: s.era, held: true, fingerprint: in.Fingerprint, known: true, value: out.Value, storedErr: stored}
		}
		if !mine {
			return false, s // a replay of nothing, or of another request
		}
		if s.known {
			return s.value == out.Value && s.storedErr == stored, s
		}
		s.known, s.value, s.storedErr = true, out.Value, stored
		return true, s
	}
	return false, s
}

// observe reports whether effects are what state s committed.
func observe(s state, effects []string) bool {
	switch {
	case !s.held:
		return len(effects) == 0
	case s.known && !s.storedErr:
		return len(effects) == 1 && effects[0] == s.value
	default:
		return len(effects) <= 1
	}
}

// Model is the porcupine model of the promise, partitioned by key.
func Model() porcupine.Model {
	return porcupine.Model{
		Partition: partition,
		Init:      func() any { return state{} },
		Step: func(s, in, out any) (bool, any) {
			return step(s.(state), in.(Input), out.(Output))
		},
		DescribeOperation: describeOperation,
		DescribeState:     describeState,
	}
}

// partition splits a history by key, keeping each key's operations in
// their order, and narrows it where the verdict cannot change, because a
// key once held stays held within an era (the search is exponential in the
// calls that overlap, and 256 twins of one key all do):
//
//   - Of the calls whose outcome is unknown it keeps only the first invoked
//     per fingerprint and era: they never return, so its interval holds
//     theirs, and only the first of them linearized can change the state
//     (it takes the key if free), which the first invoked can do at the
//     same instant.
//   - Of the replays whose body ran (Output.Ran) with one fingerprint, era
//     and answer, only the first invoked is checked as one that may be its
//     own commit; the others are checked as plain replays. If one of them
//     is the commit, at instant p, the first invoked can be instead: it was
//     invoked before p, and it cannot have returned before p (linearized
//     before p on a free key, it would have been the commit), so p is in
//     its interval.
//   - An in-progress answer needs a free key: if it holds at some instant
//     of the call, it holds at its invocation, so the call is checked
//     there. A replay or a mismatch needs a held key: if that holds at some
//     instant, it holds at the return, so the call is checked there. (A
//     replay of a key whose value no call saw yet sets it; no later
//     operation it could come before accepts another value.)
func partition(history []porcupine.Operation) [][]porcupine.Operation {
	byKey := map[string]int{}
	type lostKey struct {
		key, fingerprint string
		era              int
	}
	type ranKey struct {
		lostKey
		answer Answer
		value  string
	}
	firstLost := map[lostKey]int{} // index in history
	firstRan := map[ranKey]int{}
	for i, op := range history {
		in, out := op.Input.(Input), op.Output.(Output)
		switch {
		case in.Observe:
		case out.Answer == Unknown:
			k := lostKey{in.Key, in.Fingerprint, in.Era}
			if j, ok := firstLost[k]; !ok || op.Call < history[j].Call {
				firstLost[k] = i
			}
		case out.Replayed && out.Ran:
			k := ranKey{lostKey{in.Key, in.Fingerprint, in.Era}, out.Answer, out.Value}
			if j, ok := firstRan[k]; !ok || op.Call < history[j].Call {
				firstRan[k] = i
			}
		}
	}
	var parts [][]porcupine.Operation
	for i, op := range history {
		in := op.Input.(Input)
		if !in.Observe && op.Output.(Output).Answer == Unknown && firstLost[lostKey{in.Key, in.Fingerprint, in.Era}] != i {
			continue
		}
		out := op.Output.(Output)
		if out.Replayed && out.Ran && firstRan[ranKey{lostKey{in.Key, in.Fingerprint, in.Era}, out.Answer, out.Value}] != i {
			out.Ran = false
			op.Output = out
		}
		switch {
		case in.Observe:
		case out.Answer == InProgress:
			op.Return = op.Call
		case out.Answer == Mismatch, out.Replayed && !out.Ran && (out.Answer == Value || out.Answer == StoredError):
			op.Call = op.Return
		}
		p, ok := byKey[in.Key]
		if !ok {
			p = len(parts)
			byKey[in.Key] = p
			parts = append(parts, nil)
		}
		parts[p] = append(parts[p], op)
	}
	return parts
}

func describeOperation(in, out any) string {
	i, o := in.(Input), out.(Output)
	if i.Observe {
		return fmt.Sprintf("effects of %s = [%s]", i.Key, strings.Join(o.Effects, ", "))
	}
	fp := short(i.Fingerprint)
	if i.Era > 0 {
		fp += fmt.Sprintf(" era %d", i.Era)
	}
	switch o.Answer {
	case Value, StoredError:
		how := "fresh"
		switch {
		case o.Replayed && o.Ran:
			how = "replay (its body ran)"
		case o.Replayed:
			how = "replay"
		}
		return fmt.Sprintf("call(%s) -> %s %s %s", fp, how, o.Answer, o.Value)
	}
	return fmt.Sprintf("call(%s) -> %s", fp, o.Answer)
}

func describeState(st any) string {
	s := st.(state)
	switch {
	case !s.held:
		return fmt.Sprintf("free (era %d)", s.era)
	case !s.known:
		return fmt.Sprintf("held by %s, answer not seen yet", short(s.fingerprint))
	case s.storedErr:
		return fmt.Sprintf("held by %s: stored error %s", short(s.fingerprint), s.value)
	}
	return fmt.Sprintf("held by %s: %s", short(s.fingerprint), s.value)
}

// short shortens a fingerprint for pictures.
func short(fp string) string {
	if len(fp) > 12 {
		return fp[:12]
	}
	return fp
}

// sortedCopy returns effects sorted, leaving the caller's slice alone.
func sortedCopy(effects []string) []string {
	s := slices.Clone(effects)
	slices.Sort(s)
	return s
}
