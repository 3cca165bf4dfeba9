package idemledger

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"reflect"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"
)

func (e *env) inspectCmd(c *common) (*flag.FlagSet, func(context.Context, *pgx.Conn, []string) error) {
	fs := flag.NewFlagSet("inspect", flag.ContinueOnError)
	scope := fs.String("scope", "", "the key's scope (tenant); \"\" for a single-tenant service")
	method := fs.String("method", "", "the ledger method, its full name or its end (Payments.Charge); default every method")
	var requests files
	fs.Var(&requests, "request", "a request FILE to fingerprint the way the method does: would it replay or mismatch? "+
		"Twice (the first request, then the refused one) names the fields that differ")
	return fs, func(ctx context.Context, db *pgx.Conn, args []string) error {
		key, err := oneKey("inspect", args)
		if err != nil {
			return err
		}
		if len(requests) > 2 {
			return fail(ExitUsage, "inspect: -request given %d times: give it once (would it replay?) or twice (which fields differ?)", len(requests))
		}
		keys, err := findKeys(ctx, db, c, *scope, *method, key)
		if err != nil {
			return err
		}
		if len(keys) == 0 {
			return fail(ExitNotFound, "no key %q in scope %q%s", key, *scope, methodNote(*method))
		}
		mismatch := false
		if len(requests) > 0 {
			if mismatch, err = e.checkRequests(keys, requests, *method); err != nil {
				return err
			}
		}
		if c.json {
			err = e.writeJSON(keys)
		} else {
			err = printKeys(e.stdout, keys)
		}
		if err == nil && mismatch {
			return fail(ExitMismatch, "")
		}
		return err
	}
}

func methodNote(method string) string {
	if method == "" {
		return ""
	}
	return fmt.Sprintf(" for method %q", method)
}

// files is a flag given once per file.
type files []string

func (f *files) String() string     { return strings.Join(*f, ", ") }
func (f *files) Set(v string) error { *f = append(*f, v); return nil }

// checkRequests fingerprints each request file with the fingerprint
// function registered for each key's method and records the verdicts;
// with two files, it names the fields that differ. It reports whether any
// file would be refused.
func (e *env) checkRequests(keys []Key, paths []string, method string) (bool, error) {
	bodies := make([][]byte, len(paths))
	for i, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			return false, fmt.Errorf("-request: %w", err)
		}
		bodies[i] = b
	}
	mismatch := false
	for i := range keys {
		k := &keys[i]
		name := k.Method
		if k.Mode == "inline" {
			name = method
		}
		fp, ok := e.lookupFingerprint(name)
		if !ok {
			return false, fail(ExitError, "-request: this binary has no fingerprint function for method %q: the function is generated into the service's package, "+
				"so build this command into a binary of the service's with idemledger.Main and idemledger.WithFingerprint (see the package documentation)", name)
		}
		sums := make([][]byte, len(paths))
		for j, p := range paths {
			sum, err := fp(bodies[j])
			if err != nil {
				return false, fmt.Errorf("-request %s: %w", p, err)
			}
			sums[j] = sum
			c := &RequestCheck{File: p, Fingerprint: hex.EncodeToString(sum), Verdict: "replay",
				LastRefused: k.mismatchFP != nil && bytes.Equal(sum, k.mismatchFP)}
			if !bytes.Equal(sum, k.fp) {
				c.Verdict = "mismatch"
				mismatch = true
			}
			if j == 0 {
				k.Request = c
			} else {
				k.Request2 = c
			}
		}
		if len(paths) == 2 && !bytes.Equal(sums[0], sums[1]) {
			differs, err := differingFields(fp, bodies[0], bodies[1], sums[0])
			if err != nil {
				return false, fmt.Errorf("-request %s, %s: name the fields that differ: %w", paths[0], paths[1], err)
			}
			k.Differs = differs
		}
	}
	return mismatch, nil
}

// differingFields names the fields of the JSON objects a and b that change
// a's fingerprint (sumA) as fp computes it: for each field whose values
// differ (in nested objects, each nested field), a is fingerprinted again
// with that one field as b has it. A field the fingerprint leaves out
// (tagged idem:"-") is not named, whatever its values. Fields are named as
// in the files, nested ones joined by dots. Files that are not JSON objects
// have no fields to name: their difference is reported as "(the whole
// request)".
func differingFields(fp func([]byte) ([]byte, error), a, b, sumA []byte) ([]string, error) {
	objA, okA := jsonObject(a)
	objB, okB := jsonObject(b)
	if !okA || !okB {
		return []string{"(the whole request)"}, nil
	}
	var out []string
	var walk func(path []string, x, y map[string]any) error
	walk = func(path []string, x, y map[string]any) error {
		names := map[string]bool{}
		for n := range x {
			names[n] = true
		}
		for n := range y {
			names[n] = true
		}
		for _, n := range slices.Sorted(maps.Keys(names)) {
			vx, inX := x[n]
			vy, inY := y[n]
			if inX == inY && reflect.DeepEqual(vx, vy) {
				continue
			}
			p := append(slices.Clone(path), n)
			ox, isObjX := vx.(map[string]any)
			oy, isObjY := vy.(map[string]any)
			if isObjX && isObjY {
				before := len(out)
				if err := walk(p, ox, oy); err != nil {
					return err
				}
				if len(out) > before {
					continue
				}
			}
			variant, err := json.Marshal(withField(objA, p, vy, inY))
			if err != nil {
				return err
			}
			sum, err := fp(variant)
			if err != nil {
				return fmt.Errorf("fingerprint %s with %s taken from the second file: %w", "the first file", strings.Join(p, "."), err)
			}
			if !bytes.Equal(sum, sumA) {
				out = append(out, strings.Join(p, "."))
			}
		}
		return nil
	}
	if err := walk(nil, objA, objB); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		// The fingerprints differ, but no one field makes them: the
		// fields count together (or the method's function reads the
		// file otherwise).
		return []string{"(no single field: several together)"}, nil
	}
	return out, nil
}

// jsonObject decodes b as a JSON object, numbers kept as written.
func jsonObject(b []byte) (map[string]any, bool) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v map[string]any
	if err := dec.Decode(&v); err != nil || v == nil {
		return nil, false
	}
	return v, true
}

// withField returns a copy of obj whose field at path is v (removed when
// present is false); obj is not changed.
func withField(obj map[string]any, path []string, v any, present bool) map[string]any {
	out := maps.Clone(obj)
	if len(path) == 1 {
		if present {
			out[path[0]] = v
		} else {
			delete(out, path[0])
		}
		return out
	}
	inner, _ := out[path[0]].(map[string]any)
	out[path[0]] = withField(inner, path[1:], v, present)
	return out
}

// lookupFingerprint finds the fingerprint function registered under name,
// or under the end of name after a dot.
func (e *env) lookupFingerprint(name string) (func([]byte) ([]byte, error), bool) {
	if name == "" {
		return nil, false
	}
	if fp, ok := e.fingerprints[name]; ok {
		return fp, true
	}
	for n, fp := range e.fingerprints {
		if strings.HasSuffix(name, "."+n) || strings.HasSuffix(n, "."+name) {
			return fp, true
		}
	}
	return nil, false
}

// printKeys prints each key as an aligned list of fields.
func printKeys(w io.Writer, keys []Key) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for i, k := range keys {
		if i > 0 {
			fmt.Fprintln(tw)
		}
		row := func(name, format string, args ...any) {
			fmt.Fprintf(tw, "%s\t%s\n", name, fmt.Sprintf(format, args...))
		}
		row("table", "%s (%s)", k.Table, k.Mode)
		row("scope", "%q", k.Scope)
		if k.Method != "" {
			row("method", "%s", k.Method)
		}
		row("key", "%q", k.Key)
		row("status", "%s", k.Status)
		row("state", "%s", k.State)
		row("fingerprint", "%s", k.Fingerprint)
		if k.Mode == "ledger" {
			row("mismatch", "%s", mismatchText(k))
		}
		row("created", "%s", when(k.CreatedAt, k.Now))
		row("expires", "%s", when(k.ExpiresAt, k.Now))
		if k.Mode == "ledger" {
			row("lock", "%s", lockText(k))
			row("fence", "%d", k.Fence)
			if k.Intention != "" {
				row("intention", "%s", k.Intention)
			}
			row("steps", "%s", stepsText(k.Steps))
		}
		if k.Error != nil {
			row("error", "%s: %s", k.Error.Name, k.Error.Message)
		}
		for _, r := range []*RequestCheck{k.Request, k.Request2} {
			if r != nil {
				row("request", "%s", requestText(k, r))
			}
		}
		if k.Differs != nil {
			row("differs", "%s: the fields of %s that change the fingerprint of %s", strings.Join(k.Differs, ", "), k.Request2.File, k.Request.File)
		} else if k.Request != nil && k.Request2 == nil && k.Request.Verdict == "mismatch" {
			row("differs", "%s", "to name the fields, pass the first request too: -request FIRST -request "+k.Request.File)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		printResponse(w, k)
	}
	return tw.Flush()
}

func printResponse(w io.Writer, k Key) {
	what := "response"
	if k.Mode == "inline" {
		what = "row"
	}
	switch r := k.Response; {
	case r == nil:
		fmt.Fprintf(w, "%-13s(none)\n", what)
	case r.JSON != nil:
		var pretty bytes.Buffer
		if json.Indent(&pretty, r.JSON, "  ", "  ") != nil {
			pretty.Write(r.JSON)
		}
		fmt.Fprintf(w, "%-13s%d bytes, JSON:\n  %s\n", what, r.Bytes, pretty.String())
	default:
		fmt.Fprintf(w, "%-13s%d bytes, not JSON (hex): %s\n", what, r.Bytes, r.Hex)
	}
}

func when(t, now time.Time) string {
	if t.IsZero() {
		return "-"
	}
	d := t.Sub(now).Round(time.Second)
	rel := "now"
	switch {
	case d > 0:
		rel = "in " + d.String()
	case d < 0:
		rel = (-d).String() + " ago"
	}
	return t.UTC().Format("2006-01-02 15:04:05.000 MST") + " (" + rel + ")"
}

func lockText(k Key) string {
	switch {
	case k.LockedUntil == nil:
		return "none"
	case k.LockLive:
		return "held until " + when(*k.LockedUntil, k.Now) + " by the call with fence " + fmt.Sprint(k.Fence)
	default:
		return "expired " + when(*k.LockedUntil, k.Now)
	}
}

func stepsText(steps json.RawMessage) string {
	if steps == nil {
		return "none"
	}
	return string(steps)
}

func requestText(k Key, r *RequestCheck) string {
	if r.Verdict == "replay" {
		return fmt.Sprintf("%s fingerprints to %s: equal, a retry with it REPLAYS the stored answer", r.File, r.Fingerprint)
	}
	text := fmt.Sprintf("%s fingerprints to %s: MISMATCH, a retry with it gets idem.ErrMismatch (HTTP 422)", r.File, r.Fingerprint)
	if r.LastRefused {
		text += "; it is the request last refused, at " + when(k.LastMismatch.At, k.Now)
	}
	return text
}

// mismatchText is the last mismatch a ledger recorded on the key.
func mismatchText(k Key) string {
	m := k.LastMismatch
	switch {
	case m == nil && !k.mismatches:
		return "not recorded: the table lacks the mismatch_at and mismatch_fingerprint columns (apply the migration this version of idemgen generates)"
	case m == nil:
		return "none recorded: no request with this key was refused"
	}
	text := fmt.Sprintf("last at %s: a request fingerprinting to %s was refused (idem.ErrMismatch, HTTP 422)", when(m.At, k.Now), m.Fingerprint)
	if m.Earlier {
		text += ", before the row's current request was claimed (it refused the key's previous use)"
	}
	return text
}
