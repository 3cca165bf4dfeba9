// Package s3_putobject is a case of the effect corpus.
//
// Expect: refused
package s3_putobject

import (
	"context"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/jackc/pgx/v5"
)

// Svc is the service.
type Svc struct{ s3 *s3.Client }

// Create writes an object to S3.
//
//go:generate go tool idemgen -tests=false
func (s *Svc) Create(ctx context.Context, tx pgx.Tx, id int64) error {
	if _, err := s.s3.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("b"), Key: aws.String("k"), Body: strings.NewReader("x")}); err != nil {
		return err
	}
	_, err := tx.Exec(ctx, "INSERT INTO orders (id) VALUES ($1)", id)
	return err
}
