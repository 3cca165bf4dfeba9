//go:build corpusdeps

// The corpus cases live under testdata (so that ./... of this module, which
// CI vets with idemvet, does not see the refused ones); go mod tidy does not
// read testdata, so the libraries they import are named here.

package effectscorpus

import (
	_ "github.com/Masterminds/squirrel"
	_ "github.com/aws/aws-sdk-go-v2/aws"
	_ "github.com/aws/aws-sdk-go-v2/feature/s3/manager"
	_ "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	_ "github.com/aws/aws-sdk-go-v2/service/s3"
	_ "github.com/bradfitz/gomemcache/memcache"
	_ "github.com/elastic/go-elasticsearch/v8"
	_ "github.com/elastic/go-elasticsearch/v8/esapi"
	_ "github.com/georgysavva/scany/v2/pgxscan"
	_ "github.com/georgysavva/scany/v2/sqlscan"
	_ "github.com/go-resty/resty/v2"
	_ "github.com/google/uuid"
	_ "github.com/idemgen/idemgen/gen" // the corpus test builds cmd/idemgen and cmd/idemvet
	_ "github.com/jackc/pgx/v5"
	_ "github.com/jackc/pgx/v5/pgconn"
	_ "github.com/jackc/pgx/v5/pgxpool"
	_ "github.com/jmoiron/sqlx"
	_ "github.com/opensearch-project/opensearch-go/v4/opensearchapi"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "github.com/redis/go-redis/v9"
	_ "github.com/redis/rueidis"
	_ "github.com/rs/zerolog/log"
	_ "github.com/sirupsen/logrus"
	_ "github.com/stripe/stripe-go/v82"
	_ "github.com/stripe/stripe-go/v82/paymentintent"
	_ "github.com/uptrace/bun"
	_ "go.opentelemetry.io/otel"
	_ "go.opentelemetry.io/otel/attribute"
	_ "go.uber.org/zap"
	_ "gorm.io/driver/postgres"
	_ "gorm.io/gorm"
)
