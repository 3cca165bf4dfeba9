package connect

import "net/http"

type Request[T any] struct {
	Msg    *T
	header http.Header
}

func NewRequest[T any](m *T) *Request[T] { return &Request[T]{Msg: m, header: http.Header{}} }

func (r *Request[T]) Header() http.Header { return r.header }
