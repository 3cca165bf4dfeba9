// Package ir is the generator's model: plain data saying what each annotated
// method is (its mode, arguments, result, what its fingerprint hashes), built
// by gen/internal/analyze and read by the emitters. It imports neither
// go/types nor jennifer nor x/tools, so it prints as JSON (-debug-model) and
// is tested without emitting anything.
package ir

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Import paths the generator recognises by type, never by name, and the
// generated code imports.
const (
	PgxPath      = "github.com/jackc/pgx/v5"
	SQLPath      = "database/sql"
	IdemPath     = "github.com/idemgen/idemgen/runtime/idem"
	IdemtestPath = "github.com/idemgen/idemgen/runtime/idemtest"
	// IdemprotoPath is the runtime module for protobuf messages, which the
	// generated code imports only for a method that takes or returns one.
	IdemprotoPath = "github.com/idemgen/idemgen/runtime/idemproto"
)

// Mode is how a method is made idempotent.
type Mode string

// The two modes, decided from the method's parameters.
const (
	// ModeAtomic: the method takes a transaction (Tx); the claim, the work and the
	// stored response commit in one transaction.
	ModeAtomic Mode = "atomic"
	// ModeExternal: the method takes no transaction; the claim is an explicit
	// in-progress row with a lock timeout and a fencing token.
	ModeExternal Mode = "external"
	// ModeInline: the method takes a transaction (Tx) and its own INSERT writes the
	// key into the business row (-inline); a lookup method answers retries.
	ModeInline Mode = "inline"
)

// Tx is the kind of transaction an atomic or inline method takes, decided
// from its second parameter's type.
type Tx string

// The transaction kinds.
const (
	// TxNone: external mode, no transaction.
	TxNone Tx = ""
	// TxPgx: a pgx.Tx; the store is built from a *pgxpool.Pool
	// (idem.NewStore).
	TxPgx Tx = "pgx"
	// TxSQL: a *sql.Tx (database/sql); the store is built from a *sql.DB
	// (idem.NewSQLStore). The wrappers call the same runtime functions
	// (idem.Atomic, idem.Inline, ...) for both kinds: the body's type picks
	// the runtime's driver.
	TxSQL Tx = "database/sql"
)

// Package is the model of one package: every annotated method in it and the
// package-level settings its directives agree on. It holds plain values
// only, so it can be printed (-debug-model) and tested without emitting.
type Package struct {
	Path string // import path
	Name string // package name
	Dir  string // absolute directory

	Table           string // ledger table, validated
	TableQuoted     string // the table as SQL, quoted
	MigrationsDir   string // relative to Dir, slash-separated; "" when off
	MigrationFormat string
	// Distributed is the -distributed setting, validated (citus:TABLE.COLUMN):
	// the ledger migration distributes the table on Citus. "" for none.
	Distributed string `json:",omitempty"`
	Tests       bool   // generate the _test.go file
	// Constraint is the //go:build expression of the generated files: the
	// conjunction of the constraints of the files declaring what they refer
	// to (annotated methods, receivers, their argument and result types),
	// "" when none has one.
	Constraint string

	// Declared are the package-level identifiers of the package that
	// generated names could take (names.MayCollide), sorted.
	Declared []string `json:",omitempty"`

	Receivers []*Receiver // sorted by name
	Named     []*Named    // named types that get a fingerprint helper, sorted by their qualified name
}

// Receiver is a type with annotated methods; it gets one wrapper type.
type Receiver struct {
	Name    string // e.g. Payments
	Methods []*Method
	// Tx is the transaction kind its atomic and inline methods share, which
	// decides the store its wrapper takes; TxNone when all are external.
	Tx Tx `json:",omitempty"`
}

// Method is one annotated method.
type Method struct {
	Receiver string // receiver type name
	Name     string // method name
	Key      string // receiver and method, "Payments.Charge": how messages and doc comments name it
	Ledger   string // the ledger's method value, unique per module (see ledgerName)
	Pos      string // the directive's position, file:line:col

	Mode        Mode
	Tx          Tx            `json:",omitempty"` // atomic and inline modes: the transaction the method takes
	Retention   time.Duration `json:",omitempty"` // 0: the store's default
	LockTimeout time.Duration `json:",omitempty"` // external mode; 0: the store's default
	FinalErrors []string      `json:",omitempty"` // package-level error variables
	Storm       int           // goroutines in the generated storm test

	Params []Param `json:",omitempty"` // the arguments after ctx (and tx), all fingerprinted
	Result *Type   `json:",omitempty"` // nil when the method returns only an error

	Fingerprinted []string `json:",omitempty"` // field paths hashed, in order, for doc comments
	Omitted       []string `json:",omitempty"` // field paths left out (idem:"-")
	Encoding      Encoding // rules of the encoding that apply to this request

	Inline *Inline `json:",omitempty"` // inline mode only

	// RequestKey is the request field the wrapper takes the key from when
	// the context carries none (-key); nil without -key.
	RequestKey *RequestKey `json:",omitempty"`

	// Scalars are the fingerprinted scalars a generated test could change
	// (see Scalar), in the order the fingerprint hashes them; which one it
	// changes is the test emitter's choice.
	Scalars []Scalar `json:",omitempty"`
	// HasEffectFixture: the package's tests declare the optional fixture
	// counting this method's effects (names.EffectFixture).
	HasEffectFixture bool `json:",omitempty"`
	// HasOtherFixture: the package's tests declare the optional fixture
	// returning another request (names.OtherFixture).
	HasOtherFixture bool `json:",omitempty"`

	// Effects are the calls outside the transaction that the method
	// reaches and an //idem:effect-ok comment allows, sorted by position.
	// A reached effect without one stops generation instead.
	Effects []Effect `json:",omitempty"`
}

// Effect is a call with an effect outside the method's transaction that
// an //idem:effect-ok comment allows.
type Effect struct {
	Call   string   // the function called, e.g. (*net/http.Client).Do
	Via    []string `json:",omitempty"` // the functions from the method to the call, e.g. Bank.Transfer
	Pos    string   // the call: file:line, relative to the package directory, or import path/file:line outside it
	Reason string   // the comment's reason
}

// NoMismatch reports that no other request can be derived for the
// generated mismatch test: the method takes arguments, but has neither a
// scalar to vary (Scalars) nor the other-request fixture.
func (m *Method) NoMismatch() bool {
	return len(m.Params) > 0 && len(m.Scalars) == 0 && !m.HasOtherFixture
}

// Encoding says which rules of the fingerprint's encoding a request meets,
// for its doc comment.
type Encoding struct {
	Time        bool     `json:",omitempty"` // some time.Time is hashed (by its instant)
	NilDistinct bool     `json:",omitempty"` // some slice or map tells nil from empty
	Text        []string `json:",omitempty"` // types hashed by their text form (MarshalText), as the source names them
	EmptyIsNil  []string `json:",omitempty"` // field paths tagged idem:",emptyisnil"
	Proto       []string `json:",omitempty"` // protobuf message types hashed through protoreflect (idemproto.Fingerprint), as the source names them
	RequestID   []string `json:",omitempty"` // paths of AIP-155 request_id fields left out (Param.ProtoOmit), e.g. req.request_id
}

// Param is an argument of a method after ctx (and tx).
type Param struct {
	Name   string // name hashed into the fingerprint (the declared name, or argN)
	Local  string // identifier used in generated code (names.Local)
	Type   *Type
	Source string // the type as the package's source spells it, for messages
	// ProtoOmit (a protobuf message argument): the fields of the message
	// left out of its fingerprint by name, its AIP-155 request_id, which
	// is the idempotency key.
	ProtoOmit []string `json:",omitempty"`
}

// Scalar is a fingerprinted number, string or bool reached from an argument
// through struct fields and pointers only: a generated test can change it
// in the sample (a.Req.Amount) to make another request.
type Scalar struct {
	Param int      // index into Params
	Path  []string // field names from the parameter to the scalar
	Kind  string   // "int", "uint", "float", "complex", "string", "bool"
}

// Kind is the shape of a Type.
type Kind string

// Type kinds.
const (
	KindBasic   Kind = "basic"
	KindNamed   Kind = "named"
	KindPointer Kind = "pointer"
	KindSlice   Kind = "slice"
	KindArray   Kind = "array"
	KindMap     Kind = "map"
	KindStruct  Kind = "struct"
	// KindFunc, KindChan and KindInterface are never fingerprinted; they are
	// rendered, with their imports, where a left-out field or a signature
	// needs them.
	KindFunc      Kind = "func"
	KindChan      Kind = "chan"
	KindInterface Kind = "interface"
	KindOther     Kind = "other" // anything else: rendered from Expr, never fingerprinted
)

// Type is a Go type as the emitter needs it.
type Type struct {
	Kind     Kind
	Basic    string  `json:",omitempty"` // KindBasic, and KindNamed over a basic type: the basic type's name, e.g. "int64"
	PkgPath  string  `json:",omitempty"` // KindNamed: the declaring package's import path
	Name     string  `json:",omitempty"` // KindNamed: the type name
	TypeArgs []*Type `json:",omitempty"` // KindNamed: instantiation
	Elem     *Type   `json:",omitempty"` // pointer, slice, array, map value
	Key      *Type   `json:",omitempty"` // map key
	Len      int64   `json:",omitempty"` // array length
	Fields   []Field `json:",omitempty"` // struct fields; KindInterface: methods (Type is a KindFunc) and embedded types
	Params   []*Type `json:",omitempty"` // KindFunc
	Results  []*Type `json:",omitempty"` // KindFunc
	Variadic bool    `json:",omitempty"` // KindFunc: the last parameter is ...Elem of its slice type
	ChanDir  string  `json:",omitempty"` // KindChan: "chan", "<-chan" or "chan<-"
	Expr     string  `json:",omitempty"` // KindOther: the type as Go source
	// Proto (KindPointer): a pointer to a protobuf message (its method
	// set has ProtoReflect() protoreflect.Message), fingerprinted by
	// idemproto.Fingerprint and, as a response, stored by idemproto.Encode.
	Proto bool `json:",omitempty"`
}

// NamedKey identifies a named type, with its type arguments if it is an
// instantiation of a generic type (Page[Money] and Page[string] are two
// types, each with its own fingerprint helper).
func (t *Type) NamedKey() string { return t.str(true) }

// Display is the type as a doc comment names it: Page[Money], not its
// import path.
func (t *Type) Display() string { return t.str(false) }

// str spells t; full qualifies named types by import path, otherwise by
// the last element of it (and not at all in the type's own name).
func (t *Type) str(full bool) string {
	if t == nil {
		return "?"
	}
	switch t.Kind {
	case KindBasic:
		return t.Basic
	case KindNamed:
		s := t.Name
		if full {
			s = t.PkgPath + "." + t.Name
		}
		if len(t.TypeArgs) > 0 {
			args := make([]string, len(t.TypeArgs))
			for i, a := range t.TypeArgs {
				args[i] = a.str(full)
			}
			s += "[" + strings.Join(args, ",") + "]"
		}
		return s
	case KindPointer:
		return "*" + t.Elem.str(full)
	case KindSlice:
		return "[]" + t.Elem.str(full)
	case KindArray:
		return fmt.Sprintf("[%d]%s", t.Len, t.Elem.str(full))
	case KindMap:
		return "map[" + t.Key.str(full) + "]" + t.Elem.str(full)
	case KindStruct:
		fields := make([]string, len(t.Fields))
		for i, f := range t.Fields {
			fields[i] = f.Name + " " + f.Type.str(full) + " " + strconv.Quote(f.Tag)
		}
		return "struct{" + strings.Join(fields, "; ") + "}"
	default:
		return string(t.Kind) + ":" + t.Expr
	}
}

// Field is a struct field.
type Field struct {
	Name     string `json:",omitempty"`
	Type     *Type
	Embedded bool   `json:",omitempty"`
	Alias    *Type  `json:",omitempty"` // embedded through an alias: the alias, which names the field
	Tag      string `json:",omitempty"`
	Omitted  bool   `json:",omitempty"` // tagged idem:"-": not fingerprinted
	// EmptyIsNil (idem:",emptyisnil", slices and maps): an empty value
	// fingerprints as nil.
	EmptyIsNil bool `json:",omitempty"`
}

// Named is a named type whose fingerprint is written by a helper function.
type Named struct {
	Type       *Type  // the KindNamed reference
	PkgName    string // the name of the declaring package
	Underlying *Type  `json:",omitempty"`
	// Recursive: the type reaches itself, so a value may be cyclic; the
	// helper guards its pointers, slices and maps with Fingerprinter.Enter.
	Recursive bool `json:",omitempty"`
	// Text: another package's type with fields generated code cannot
	// read, hashed by its MarshalText form (TextPtr: through a pointer
	// receiver). Underlying is nil.
	Text, TextPtr bool `json:",omitempty"`
}

// Inline is the model of an inline-mode method (-inline=TABLE
// -lookup=METHOD): the key, scope and fingerprint live in the business
// table's own row, the method's INSERT is the claim, and the lookup method
// answers retries from the row.
type Inline struct {
	Table       string   // the business table, validated, e.g. orders or shop.orders
	TableQuoted string   // the table as SQL, quoted
	KeyColumn   string   // orders.idempotency_key, for doc comments
	Index       string   // the partial unique index on (scope, key)
	Lookup      string   // the lookup method, e.g. OrderByKey
	DDL         []string // the statements that add the columns and the index (idempotent), for the generated tests
}

// RequestKey is the field of a request that holds its idempotency key
// (-key=evt.EventID).
type RequestKey struct {
	Text  string   // as the directive wrote it, e.g. evt.EventID
	Param int      // index into Params
	Path  []string // field names from the parameter to the key
	// Nil are the lengths of the prefixes of Path that are pointers (0: the
	// parameter itself), each checked for nil before the key is read.
	Nil []int `json:",omitempty"`
	// Conv is how the field becomes a string: "" (it is a string), "string"
	// (a named string type) or "uuid" (a [16]byte-based type: idem.UUIDKey).
	Conv string `json:",omitempty"`
}
