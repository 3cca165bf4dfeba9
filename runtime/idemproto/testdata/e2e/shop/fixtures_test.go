package shop

import (
	"testing"

	"github.com/idemgen/idemgen/runtime/idemproto/testpb"
	"github.com/idemgen/idemgen/runtime/idemtest"
)

func TestMain(m *testing.M) { idemtest.Main(m) }

func newShopForTest(t *testing.T, db *idemtest.DB) *Shop { return &Shop{} }

func sampleShopPlaceArgs(t *testing.T) (o *testpb.Order) {
	return &testpb.Order{Id: "o-1", Amount: 1250, Note: "gift"}
}

func sampleShopRecordArgs(t *testing.T) (o *testpb.Order) {
	return &testpb.Order{Id: "o-2", Amount: 990, Note: "wrap it"}
}

func sampleShopSendArgs(t *testing.T) (o *testpb.Everything) {
	return &testpb.Everything{S: "parcel", I64: 3, Counts: map[string]int64{"x": 1, "y": 2}}
}
