//go:build !linux

package pgserver

import (
	"context"
	"fmt"
	"syscall"
)

// killTree SIGKILLs p, a postmaster, and waits until it has exited (or ctx
// ends). Outside Linux its children are not listed: each exits on its own
// once it notices the postmaster is gone.
func killTree(ctx context.Context, p *process) error {
	if err := p.proc.Signal(syscall.SIGKILL); err != nil {
		return err
	}
	select {
	case <-p.exited:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("the postmaster did not exit: %w", context.Cause(ctx))
	}
}
