// Package outbox shows the outbox on River: an atomic method that must
// cause an effect after its commit (Shop.Charge must send a receipt email)
// enqueues a River job in its own transaction, so the job exists if and
// only if the charge committed; the job's worker sends the email through an
// external-mode method (Mailer.SendReceipt) that passes a downstream key to
// the email provider and records the send as a step, so a worker killed
// after the send, or a job River retries, sends the email once.
//
// It is a module of its own so that River is not a dependency of the
// example service or of idemgen's root module.
package outbox
