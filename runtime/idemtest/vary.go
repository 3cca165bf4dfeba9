package idemtest

import (
	"reflect"
	"strings"
	"time"
)

// Scalar is a value Vary can change.
type Scalar interface {
	~string | ~bool |
		~int | ~int8 | ~int16 | ~int32 | ~int64 |
		~uint | ~uint8 | ~uint16 | ~uint32 | ~uint64 | ~uintptr |
		~float32 | ~float64 | ~complex64 | ~complex128
}

// Vary returns a value different from v of the same shape, for a test that
// needs a second valid request: an integer plus one, a float doubled (or 1
// for 0), a bool negated, and a string with its last letter or digit
// replaced by the next one of its class, so that a uuid stays a uuid (hex
// digits cycle within 0-9 and a-f), a numeric string stays numeric and an
// email stays an email; a date or RFC 3339 timestamp moves one day on. A string without a letter or digit gets "1"
// appended. The generated tests vary one fingerprinted field of the sample
// this way; a method that checks more than the shape needs the optional
// other…Args fixture instead.
func Vary[T Scalar](v T) T {
	x := reflect.ValueOf(&v).Elem()
	switch x.Kind() {
	case reflect.String:
		x.SetString(varyString(x.String()))
	case reflect.Bool:
		x.SetBool(!x.Bool())
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		x.SetInt(x.Int() + 1)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		x.SetUint(x.Uint() + 1)
	case reflect.Float32, reflect.Float64:
		if f := x.Float(); f == 0 {
			x.SetFloat(1)
		} else {
			x.SetFloat(f * 2)
		}
	case reflect.Complex64, reflect.Complex128:
		if c := x.Complex(); c == 0 {
			x.SetComplex(1)
		} else {
			x.SetComplex(c * 2)
		}
	}
	return v
}

// varyString moves a date or timestamp one day on (in its own layout) and
// otherwise replaces the last letter or digit of s by the next of its class:
// 0-9, a-f, g-z, A-F, G-Z, each cycling.
func varyString(s string) string {
	for _, layout := range []string{time.DateOnly, time.DateTime, time.RFC3339, time.RFC3339Nano} {
		if d, err := time.Parse(layout, s); err == nil {
			if out := d.AddDate(0, 0, 1).Format(layout); out != s {
				return out
			}
		}
	}
	classes := []string{"0123456789", "abcdef", "ghijklmnopqrstuvwxyz", "ABCDEF", "GHIJKLMNOPQRSTUVWXYZ"}
	for i := len(s) - 1; i >= 0; i-- {
		for _, c := range classes {
			if j := strings.IndexByte(c, s[i]); j >= 0 {
				return s[:i] + string(c[(j+1)%len(c)]) + s[i+1:]
			}
		}
	}
	return s + "1"
}
