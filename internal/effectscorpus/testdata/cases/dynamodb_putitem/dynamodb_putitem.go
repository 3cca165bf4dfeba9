// Package dynamodb_putitem is a case of the effect corpus.
//
// Expect: refused
package dynamodb_putitem

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/jackc/pgx/v5"
)

// Svc is the service.
type Svc struct{ ddb *dynamodb.Client }

// Create puts an item in DynamoDB.
//
//go:generate go tool idemgen -tests=false
func (s *Svc) Create(ctx context.Context, tx pgx.Tx, id int64) error {
	if _, err := s.ddb.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("orders")}); err != nil {
		return err
	}
	_, err := tx.Exec(ctx, "INSERT INTO orders (id) VALUES ($1)", id)
	return err
}
