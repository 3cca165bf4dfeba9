package golang

import (
	"fmt"
	"strings"
	"time"

	"github.com/dave/jennifer/jen"

	"github.com/idemgen/idemgen/gen/ir"
)

// Doc sentences shared by the identifiers of one method.

func retentionText(m *ir.Method) string {
	if m.Retention == 0 {
		return "Keys are kept for the store's retention (idem.WithRetention, 24h by default); a key sent after that is treated as new."
	}
	r := formatDuration(m.Retention)
	return fmt.Sprintf("Keys are kept for %s: a key sent after %s is treated as new.", r, r)
}

func modeText(m *ir.Method) string {
	if m.Mode == ir.ModeAtomic && m.Tx == ir.TxSQL {
		return "Mode: atomic, on database/sql. The claim, the work and the stored response commit in one *sql.Tx, or not at all."
	}
	if m.Mode == ir.ModeAtomic {
		return "Mode: atomic. The claim, the work and the stored response commit in one transaction, or not at all."
	}
	lt := "the store's lock timeout (1m by default)"
	if m.LockTimeout > 0 {
		lt = formatDuration(m.LockTimeout)
	}
	return fmt.Sprintf("Mode: external. The claim commits an in-progress row before the work runs outside any transaction; a retry meanwhile gets idem.ErrInProgress, and an attempt that dies is taken over after %s.", lt)
}

func finalText(m *ir.Method) string {
	if len(m.FinalErrors) == 0 {
		return "No final errors: any error lets a retry run the method again."
	}
	return fmt.Sprintf("Final errors, stored and replayed (errors.Is holds): %s. Any other error lets a retry run the method again.", strings.Join(m.FinalErrors, ", "))
}

func fingerprintText(m *ir.Method) string {
	if len(m.Fingerprinted) == 0 && len(m.Omitted) == 0 {
		return "Fingerprinted: nothing but the method name (it takes no arguments)."
	}
	s := "Fingerprinted: " + strings.Join(m.Fingerprinted, ", ") + "."
	if len(m.Fingerprinted) == 0 {
		s = "Fingerprinted: nothing but the method name."
	}
	if len(m.Omitted) > 0 {
		s += " Left out (idem:\"-\"): " + strings.Join(m.Omitted, ", ") + "."
	}
	for _, n := range encodingNotes(m.Encoding) {
		s += "\n" + n
	}
	return s
}

// effectsText lists the effects outside the transaction that the method
// reaches and an //idem:effect-ok comment allows, with the reason given.
func effectsText(m *ir.Method) []string {
	if len(m.Effects) == 0 {
		return nil
	}
	out := []string{"Allowed to repeat on a retry (//idem:effect-ok), though the transaction cannot undo them:"}
	if m.Mode == ir.ModeExternal {
		out = []string{"Allowed to repeat (//idem:effect-ok), though a step run again after a takeover repeats them:"}
	}
	for _, e := range m.Effects {
		via := ""
		if len(e.Via) > 0 {
			via = " via " + strings.Join(e.Via, " → ")
		}
		out = append(out, fmt.Sprintf("  - %s%s (%s): %s", e.Call, via, e.Pos, e.Reason))
	}
	return out
}

// encodingNotes are the doc comment's sentences on the encoding rules that
// apply to a request.
func encodingNotes(enc ir.Encoding) []string {
	var out []string
	if enc.Time {
		out = append(out, "A time.Time counts by its instant: its zone (Location) and monotonic clock reading are left out.")
	}
	if enc.NilDistinct {
		out = append(out, "A nil slice or map differs from an empty one, so a retry that sends [] or {} where the first request sent nothing is a mismatch; tag a field idem:\",emptyisnil\" to treat them alike.")
	}
	switch text := enc.Text; {
	case len(text) == 1:
		out = append(out, "A "+text[0]+" counts by its text form (MarshalText), the only part of it generated code can read.")
	case len(text) > 1:
		out = append(out, strings.Join(text[:len(text)-1], ", ")+" and "+text[len(text)-1]+" values count by their text form (MarshalText), the only part of them generated code can read.")
	}
	if len(enc.EmptyIsNil) > 0 {
		out = append(out, "Empty counts as nil (idem:\",emptyisnil\"): "+strings.Join(enc.EmptyIsNil, ", ")+".")
	}
	if len(enc.Proto) > 0 {
		out = append(out, "A protobuf message ("+strings.Join(enc.Proto, ", ")+") counts by its populated fields in field-number order (idemproto.Fingerprint):",
			"field names are not hashed and unknown fields are left out, so renaming a field or adding one left unset keeps old keys replayable.")
	}
	if len(enc.RequestID) > 0 {
		out = append(out, "Left out: "+strings.Join(enc.RequestID, ", ")+", the AIP-155 idempotency key (runtime/idemgrpc and runtime/idemconnect read it),",
			"so a retry that sends the key in metadata instead is the same request.")
	}
	return out
}

// Comment renders lines as a // doc comment.
func Comment(lines ...string) *jen.Statement {
	s := jen.Null()
	for i, l := range lines {
		for j, part := range strings.Split(l, "\n") {
			if i > 0 || j > 0 {
				s = s.Line()
			}
			s = s.Comment(part)
		}
	}
	return s
}

func article(name string) string {
	if name != "" && strings.ContainsRune("AEIOUaeiou", rune(name[0])) {
		return "an"
	}
	return "a"
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}

// formatDuration prints a duration the way a person writes it: 48h, 90m, 30s.
func formatDuration(d time.Duration) string {
	s := d.String()
	for _, suf := range []string{"h0m0s", "m0s"} {
		if strings.HasSuffix(s, suf) {
			s = strings.TrimSuffix(s, suf) + suf[:1]
		}
	}
	return s
}
