// Package dynamodb_via_interface is a case of the effect corpus.
//
// Expect: refused
package dynamodb_via_interface

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/jackc/pgx/v5"
)

// Svc is the service.
type Svc struct{ ddb ItemUpdater }

// ItemUpdater is the part of the DynamoDB client the service uses.
type ItemUpdater interface {
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
}

// NewSvc wires the SDK client.
func NewSvc(c *dynamodb.Client) *Svc { return &Svc{ddb: c} }

// Create updates DynamoDB through an interface of its own the SDK client implements.
//
//go:generate go tool idemgen -tests=false
func (s *Svc) Create(ctx context.Context, tx pgx.Tx, id int64) error {
	if _, err := s.ddb.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String("orders")}); err != nil {
		return err
	}
	_, err := tx.Exec(ctx, "INSERT INTO orders (id) VALUES ($1)", id)
	return err
}
