// Package shop takes and returns protobuf messages in each of idemgen's
// modes; idemproto's end-to-end test generates its wrappers and runs the
// generated tests against PostgreSQL.
package shop

import (
	"context"
	"fmt"
	"math"

	"github.com/jackc/pgx/v5"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/idemproto/testpb"
)

// Shop records orders.
type Shop struct{}

// answer is a rich response: a field of most kinds, set from the order.
func answer(id string, o *testpb.Order) (*testpb.Everything, error) {
	extra, err := anypb.New(&testpb.Inner{Name: o.GetNote(), N: o.GetAmount()})
	if err != nil {
		return nil, fmt.Errorf("pack: %w", err)
	}
	zero := int64(0)
	return &testpb.Everything{
		S: id, I64: o.GetAmount(), Db: math.Copysign(0, -1), Nums: []int64{o.GetAmount(), 0},
		Counts: map[string]int64{"a": 1, "b": 2, o.GetId(): 3}, ById: map[int32]*testpb.Inner{1: {Name: "x"}},
		Choice: &testpb.Everything_Text{}, OptI64: &zero, At: &timestamppb.Timestamp{Seconds: 1_700_000_000, Nanos: 5},
		MaybeName: wrapperspb.String(""), Attrs: &structpb.Struct{Fields: map[string]*structpb.Value{"n": structpb.NewNullValue()}},
		Extra: extra,
	}, nil
}

// Place inserts an order (atomic mode).
//
//go:generate idemgen
func (s *Shop) Place(ctx context.Context, tx pgx.Tx, o *testpb.Order) (*testpb.Everything, error) {
	var id string
	if err := tx.QueryRow(ctx, `INSERT INTO placed (amount) VALUES ($1) RETURNING id::text`, o.GetAmount()).Scan(&id); err != nil {
		return nil, fmt.Errorf("insert: %w", err)
	}
	return answer(id, o)
}

// Send sends an order away (external mode).
//
//go:generate idemgen
func (s *Shop) Send(ctx context.Context, o *testpb.Everything) (*testpb.Inner, error) {
	return &testpb.Inner{Name: o.GetS(), N: o.GetI64(), Children: []*testpb.Inner{{Name: "child"}}}, nil
}

// Record inserts an order row carrying its key (inline mode).
//
//go:generate idemgen -inline=orders -lookup=OrderByKey
func (s *Shop) Record(ctx context.Context, tx pgx.Tx, o *testpb.Order) (*testpb.Everything, error) {
	k, _ := idem.InlineKeyFrom(ctx)
	var id string
	err := tx.QueryRow(ctx, `INSERT INTO orders (ref, amount, note, idempotency_scope, idempotency_key, idempotency_fingerprint)
VALUES ($1, $2, $3, $4, $5, $6) RETURNING id::text`, o.GetId(), o.GetAmount(), o.GetNote(), k.Scope, k.Key, k.Fingerprint).Scan(&id)
	if err != nil {
		return nil, fmt.Errorf("insert order: %w", err)
	}
	return answer(id, o)
}

// OrderByKey answers a retry of Record from the order's row.
func (s *Shop) OrderByKey(ctx context.Context, tx pgx.Tx, k idem.InlineKey) (*testpb.Everything, []byte, error) {
	var id, ref, note string
	var amount int64
	var fp []byte
	err := tx.QueryRow(ctx, `SELECT id::text, ref, amount, note, idempotency_fingerprint FROM orders
WHERE idempotency_scope = $1 AND idempotency_key = $2`, k.Scope, k.Key).Scan(&id, &ref, &amount, &note, &fp)
	if err != nil {
		return nil, nil, err
	}
	r, err := answer(id, &testpb.Order{Id: ref, Amount: amount, Note: note})
	return r, fp, err
}
