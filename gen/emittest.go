package gen

// emitTests renders the twin-request tests file.
func (e *emitter) emitTests() ([]byte, error) {
	f := newFile(e.m, nil)
	return render(f)
}
