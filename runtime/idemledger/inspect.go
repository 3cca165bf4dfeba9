package idemledger

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"
)

func (e *env) inspectCmd(c *common) (*flag.FlagSet, func(context.Context, *pgx.Conn, []string) error) {
	fs := flag.NewFlagSet("inspect", flag.ContinueOnError)
	scope := fs.String("scope", "", "the key's scope (tenant); \"\" for a single-tenant service")
	method := fs.String("method", "", "the ledger method, its full name or its end (Payments.Charge); default every method")
	request := fs.String("request", "", "a request FILE to fingerprint the way the method does: would it replay or mismatch?")
	return fs, func(ctx context.Context, db *pgx.Conn, args []string) error {
		key, err := oneKey("inspect", args)
		if err != nil {
			return err
		}
		keys, err := findKeys(ctx, db, c, *scope, *method, key)
		if err != nil {
			return err
		}
		if len(keys) == 0 {
			return fail(ExitNotFound, "no key %q in scope %q%s", key, *scope, methodNote(*method))
		}
		mismatch := false
		if *request != "" {
			if mismatch, err = e.checkRequest(keys, *request, *method); err != nil {
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

// checkRequest fingerprints the request file with the fingerprint function
// registered for each key's method and records the verdict. It reports
// whether any key would refuse the request.
func (e *env) checkRequest(keys []Key, file, method string) (bool, error) {
	body, err := os.ReadFile(file)
	if err != nil {
		return false, fmt.Errorf("-request: %w", err)
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
		sum, err := fp(body)
		if err != nil {
			return false, fmt.Errorf("-request %s: %w", file, err)
		}
		k.Request = &RequestCheck{File: file, Fingerprint: hex.EncodeToString(sum), Verdict: "replay"}
		if !bytes.Equal(sum, k.fp) {
			k.Request.Verdict = "mismatch"
			mismatch = true
		}
	}
	return mismatch, nil
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
		if k.Request != nil {
			row("request", "%s", requestText(k.Request))
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

func requestText(r *RequestCheck) string {
	if r.Verdict == "replay" {
		return fmt.Sprintf("%s fingerprints to %s: equal, a retry with it REPLAYS the stored answer", r.File, r.Fingerprint)
	}
	return fmt.Sprintf("%s fingerprints to %s: MISMATCH, a retry with it gets idem.ErrMismatch (HTTP 422); the ledger keeps only the hash, so compare the file with the first request the client sent", r.File, r.Fingerprint)
}
