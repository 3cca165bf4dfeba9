// Package s3_getobject is a case of the effect corpus.
//
// Expect: accepted
package s3_getobject

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/jackc/pgx/v5"
)

// Svc is the service.
type Svc struct{ s3 *s3.Client }

// Create reads an object from S3.
//
//go:generate go tool idemgen -tests=false
func (s *Svc) Create(ctx context.Context, tx pgx.Tx, id int64) error {
	out, err := s.s3.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("b"), Key: aws.String("k")})
	if err != nil {
		return err
	}
	defer out.Body.Close()
	_, err = tx.Exec(ctx, "INSERT INTO orders (id) VALUES ($1)", id)
	return err
}
