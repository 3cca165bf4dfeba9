// Package bank posts to a bank: its functions export what they reach.
package bank

import "net/http"

// Transfer moves money.
func Transfer() error { // want Transfer:"reaches net/http.Post"
	return post()
}

func post() error { // want post:"reaches net/http.Post"
	_, err := http.Post("https://bank.example", "text/plain", nil)
	return err
}

// Audit is safe to repeat.
func Audit() error {
	_, err := http.Get("https://audit.example") //idem:effect-ok the audit service keeps the last state
	return err
}
