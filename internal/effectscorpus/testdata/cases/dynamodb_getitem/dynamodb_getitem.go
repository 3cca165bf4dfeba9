// Package dynamodb_getitem is a case of the effect corpus.
//
// Expect: accepted
package dynamodb_getitem

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/jackc/pgx/v5"
)

// Svc is the service.
type Svc struct{ ddb *dynamodb.Client }

// Create reads an item from DynamoDB.
//
//go:generate go tool idemgen -tests=false
func (s *Svc) Create(ctx context.Context, tx pgx.Tx, id int64) error {
	if _, err := s.ddb.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String("prices")}); err != nil {
		return err
	}
	_, err := tx.Exec(ctx, "INSERT INTO orders (id) VALUES ($1)", id)
	return err
}
