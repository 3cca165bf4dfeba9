package outbox

import (
	"context"
	"fmt"
	"sync"

	"github.com/idemgen/idemgen/runtime/idem"
)

// ReceiptEmail is the job Shop.Charge enqueues, and the request of
// Mailer.SendReceipt: EmailID is its idempotency key (-key).
type ReceiptEmail struct {
	EmailID     string `json:"email_id"`
	OrderID     int64  `json:"order_id"`
	To          string `json:"to"`
	AmountCents int64  `json:"amount_cents"`
}

// Kind names the job for River.
func (ReceiptEmail) Kind() string { return "receipt_email" }

// Provider sends email; it deduplicates sends by the key it is given, as
// real providers do with their idempotency headers.
type Provider interface {
	Send(ctx context.Context, key, to, body string) (messageID string, err error)
}

// Mailer sends the shop's emails through a provider.
type Mailer struct {
	provider Provider
}

// NewMailer returns a mailer sending through provider.
func NewMailer(provider Provider) *Mailer { return &Mailer{provider: provider} }

// Sent is the result of a send.
type Sent struct {
	MessageID string `json:"message_id"`
}

// SendReceipt sends an order's receipt. The send is a step (idem.Step)
// with a downstream key (idem.DownstreamKey): a retry after the provider
// accepted it, whether River retries the job or takes over a claim left by
// a killed worker, reads the recorded message ID instead of sending again.
//
//go:generate go tool idemgen -key=email.EmailID -lock-timeout=10s
func (m *Mailer) SendReceipt(ctx context.Context, email ReceiptEmail) (Sent, error) {
	id, err := idem.Step(ctx, "send", func(ctx context.Context) (string, error) {
		body := fmt.Sprintf("Order %d: %d.%02d charged. Thank you.", email.OrderID, email.AmountCents/100, email.AmountCents%100)
		return m.provider.Send(ctx, idem.DownstreamKey(ctx, "send"), email.To, body)
	})
	if err != nil {
		return Sent{}, fmt.Errorf("send receipt for order %d: %w", email.OrderID, err)
	}
	return Sent{MessageID: id}, nil
}

// FakeProvider is an in-memory email provider: it counts the sends it
// accepts and how many of them repeated a key it had already seen.
type FakeProvider struct {
	mu      sync.Mutex
	byKey   map[string]string
	sends   int
	repeats int
}

// NewFakeProvider returns an empty fake provider.
func NewFakeProvider() *FakeProvider { return &FakeProvider{byKey: map[string]string{}} }

// Send accepts an email; a key seen before returns the first message ID.
func (p *FakeProvider) Send(_ context.Context, key, to, _ string) (string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.sends++
	if id, ok := p.byKey[key]; ok {
		p.repeats++
		return id, nil
	}
	id := fmt.Sprintf("msg-%d-%s", len(p.byKey)+1, to)
	p.byKey[key] = id
	return id, nil
}

// Counts returns how many sends the provider got and how many repeated a key.
func (p *FakeProvider) Counts() (sends, repeats int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.sends, p.repeats
}
