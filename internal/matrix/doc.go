// Package matrix is the root of a module of its own that holds the type
// matrix: every case in testdata/matrix (a request or response type) is
// generated in one throwaway module, refused cases compared with their
// golden messages, and accepted ones built, vetted and tested against a
// real PostgreSQL with values drawn by pgregory.net/rapid. The module keeps
// rapid and the third-party types the cases use (uuid, decimal) out of the
// requirements of github.com/idemgen/idemgen.
package matrix
