// Package compat is the root of a module of its own that holds the tests
// proving idemgen works with the tools and libraries around it: the
// migration tools (goose, golang-migrate, tern, dbmate, atlas) applying the
// generated migrations, the routers (chi, echo) serving the middleware, and
// the database/sql drivers idem.NewSQLStore accepts or refuses (lib/pq).
//
// These tests need those libraries; keeping them in this nested module keeps
// them out of the requirements of github.com/idemgen/idemgen, so a module
// that adds the generator as a tool gets only what the generator and the
// runtime import. scripts/test.sh runs these tests with the others.
package compat
