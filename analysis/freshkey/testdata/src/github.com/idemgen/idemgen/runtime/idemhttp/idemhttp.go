package idemhttp

const HeaderKey = "Idempotency-Key"
