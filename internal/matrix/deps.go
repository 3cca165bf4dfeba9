package matrix

// The third-party types the cases in testdata/matrix use: imported here so
// that this module's go.mod and go.sum, which the generated module copies,
// hold them.
import (
	_ "github.com/google/uuid"
	_ "github.com/jackc/pgx/v5/pgtype"
	_ "github.com/shopspring/decimal"

	_ "github.com/idemgen/idemgen/runtime/idemproto/testpb" // the messages of the proto cases, and idemproto's requirements
	_ "github.com/idemgen/idemgen/runtime/idemtest"         // what the generated module's tests import, and pgx's requirements
)
