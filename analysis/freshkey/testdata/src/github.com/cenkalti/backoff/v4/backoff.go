package backoff

type BackOff interface{ NextBackOff() int }

func Retry(op func() error, b BackOff) error { return op() }
