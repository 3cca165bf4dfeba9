package idem

import "context"

type ctxKey int

func ContextWithKey(ctx context.Context, key string) context.Context {
	return context.WithValue(ctx, ctxKey(0), key)
}

func ContextWithScope(ctx context.Context, scope string) context.Context {
	return context.WithValue(ctx, ctxKey(1), scope)
}
