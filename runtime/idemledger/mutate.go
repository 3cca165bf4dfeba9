package idemledger

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
)

// Done is what release and delete print with -json.
type Done struct {
	Action string `json:"action"` // released or deleted
	Key    Key    `json:"key"`    // the key as it was before
}

func (e *env) mutateCmd(c *common, action string) (*flag.FlagSet, func(context.Context, *pgx.Conn, []string) error) {
	fs := flag.NewFlagSet(action, flag.ContinueOnError)
	scope := fs.String("scope", "", "the key's scope (required; -scope '' for a single-tenant service)")
	method := fs.String("method", "", "the ledger method, its full name or its end (Payments.Charge)")
	force := fs.Bool("force", false, "act on a key whose lock is live (the call holding it may still be running)")
	yes := fs.Bool("yes", false, "do not ask for confirmation (required when stdin is not a terminal)")
	return fs, func(ctx context.Context, db *pgx.Conn, args []string) error {
		key, err := oneKey(action, args)
		if err != nil {
			return err
		}
		if !flagSet(fs, "scope") {
			return fail(ExitUsage, "%s needs -scope (use -scope '' for a single-tenant service): it never acts across scopes", action)
		}
		keys, err := findKeys(ctx, db, c, *scope, *method, key)
		if err != nil {
			return err
		}
		k, err := e.pickOne(action, keys, key, *scope, *method, *force)
		if err != nil {
			return err
		}
		if err := e.confirm(action, k, *yes); err != nil {
			return err
		}
		if err := apply(ctx, db, action, k, *force); err != nil {
			return err
		}
		fmt.Fprintf(e.stderr, "idemledger: %s key %q of scope %q in %s%s (it was: %s, fence %d)\n",
			pastTense(action), k.Key, k.Scope, k.Table, methodNote(k.Method), k.Status, k.Fence)
		if c.json {
			return e.writeJSON(Done{Action: pastTense(action), Key: k})
		}
		return nil
	}
}

func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

func pastTense(action string) string {
	if action == "release" {
		return "released"
	}
	return "deleted"
}

// pickOne checks that exactly one key matched and that action may touch it.
func (e *env) pickOne(action string, keys []Key, key, scope, method string, force bool) (Key, error) {
	switch {
	case len(keys) == 0:
		return Key{}, fail(ExitNotFound, "no key %q in scope %q%s", key, scope, methodNote(method))
	case len(keys) > 1:
		var where []string
		for _, k := range keys {
			where = append(where, k.Table+" "+k.Method)
		}
		return Key{}, fail(ExitUsage, "key %q of scope %q is held by %d methods (%s): name one with -method or -table", key, scope, len(keys), strings.Join(where, ", "))
	}
	k := keys[0]
	if action == "release" && k.Status != "in_progress" {
		return k, fail(ExitRefused, "key %q is %s, not in progress: nothing to release (delete it to make the key new)", key, k.Status)
	}
	if k.LockLive && !force {
		return k, fail(ExitRefused, "key %q is locked until %s by a call that may still be running (fence %d): wait, or pass -force",
			key, when(*k.LockedUntil, k.Now), k.Fence)
	}
	return k, nil
}

// confirm asks on a terminal; without one, -yes is required.
func (e *env) confirm(action string, k Key, yes bool) error {
	if yes {
		return nil
	}
	if !e.terminal {
		return fail(ExitRefused, "stdin is not a terminal: pass -yes to %s key %q", action, k.Key)
	}
	consequence := "a retry with the same request takes the key over and runs the method again"
	if action == "delete" {
		consequence = "the next request with this key runs the method again as new"
		if k.Mode == "inline" {
			consequence = "the key is taken off its row (the row stays); the next request with it runs as new"
		}
	}
	fmt.Fprintf(e.stderr, "%s key %q of scope %q in %s%s (%s, fence %d)?\n%s.\nType yes to go on: ",
		action, k.Key, k.Scope, k.Table, methodNote(k.Method), k.State, k.Fence, consequence)
	line, _ := bufio.NewReader(e.stdin).ReadString('\n')
	if strings.TrimSpace(line) != "yes" {
		return fail(ExitRefused, "not confirmed: nothing done")
	}
	return nil
}

// apply runs the one statement that releases or deletes k. It filters by
// scope, method (or the inline key columns) and key, and by the fence and
// status shown, so a row that changed since is refused, not overwritten.
func apply(ctx context.Context, db *pgx.Conn, action string, k Key, force bool) error {
	t := table{id: k.tid, inline: k.Mode == "inline", mismatches: k.mismatches}
	var sql string
	args := []any{k.Scope, k.Key}
	switch {
	case t.inline:
		sql = t.inlineStatements().Delete
		args = append(args, k.fp)
	case action == "release" && force:
		sql, args = t.statements().ReleaseForce, append(args, k.Method, k.Fence)
	case action == "release":
		sql, args = t.statements().Release, append(args, k.Method, k.Fence)
	case force:
		sql, args = t.statements().DeleteForce, append(args, k.Method, k.Fence, k.Status)
	default:
		sql, args = t.statements().Delete, append(args, k.Method, k.Fence, k.Status)
	}
	tag, err := db.Exec(ctx, sql, args...)
	if err != nil {
		return fmt.Errorf("%s key %q: %w", action, k.Key, err)
	}
	if tag.RowsAffected() != 1 {
		return fail(ExitRefused, "key %q changed after it was read (a call took it over, finished or locked it): nothing done; inspect it again", k.Key)
	}
	return nil
}
