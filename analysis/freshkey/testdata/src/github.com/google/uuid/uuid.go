package uuid

type UUID [16]byte

func New() UUID { return UUID{} }

func NewString() string { return New().String() }

func (u UUID) String() string { return string(u[:]) }
