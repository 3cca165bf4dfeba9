package effectwalk

import "strings"

// Kind is the family of an effect, for messages.
type Kind string

// The kinds of effect the catalogue names.
const (
	KindHTTP     Kind = "HTTP request"
	KindNet      Kind = "network connection"
	KindRPC      Kind = "RPC"
	KindMail     Kind = "mail"
	KindProcess  Kind = "process"
	KindBroker   Kind = "message publication"
	KindAWS      Kind = "AWS request"
	KindDatabase Kind = "database call outside the transaction"
	KindFile     Kind = "file write"
	KindStore    Kind = "write to another store"
)

// Entry is one line of the effect catalogue: calls of the named functions
// or methods have an effect outside the database transaction an atomic
// method runs in.
type Entry struct {
	// Pkg is the import path of the package declaring the function or type.
	Pkg string
	// Type is the receiver's type name (a concrete type or an interface),
	// without a pointer; "" for package-level functions.
	Type string
	// Names are the functions or methods; nil means every method of Type.
	Names []string
	// Kind is the family of the effect.
	Kind Kind
	// Func entries name a function type (Type) whose calls, through a
	// value of that type, have the effect: the Elasticsearch client's
	// es.Index(…) is a call of a field of type esapi.Index.
	Func bool
	// Static entries are reported only where the call names the type
	// itself (a value of static type *pgxpool.Pool, *os.File): through an
	// interface the same value could be the method's own transaction (an
	// sqlc DBTX) or a buffer (an io.Writer), which the walk cannot tell.
	Static bool
}

// Methods of a pgx or database/sql handle that run SQL or begin a
// transaction of their own.
var (
	pgxCalls = []string{"Exec", "Query", "QueryRow", "SendBatch", "Begin", "BeginTx", "CopyFrom", "Acquire", "AcquireFunc", "Prepare"}
	sqlCalls = []string{"Exec", "ExecContext", "Query", "QueryContext", "QueryRow", "QueryRowContext", "Begin", "BeginTx", "Prepare", "PrepareContext", "Conn", "Raw"}
)

// redisWrites are the commands of a Redis client that change the store
// (or may: Do, Eval and scripts run anything), as go-redis names its
// methods; rueidis's command builder names them the same but for case
// (Hset), which redisWrite ignores.
var redisWrites = []string{
	"Set", "SetNX", "SetXX", "SetEx", "SetArgs", "SetRange", "SetBit", "GetSet", "GetDel", "GetEx", "MSet", "MSetNX", "Append",
	"Incr", "IncrBy", "IncrByFloat", "Decr", "DecrBy", "Del", "Unlink", "Expire", "ExpireAt", "ExpireNX", "ExpireXX", "ExpireGT", "ExpireLT",
	"PExpire", "PExpireAt", "Persist", "Rename", "RenameNX", "Copy", "Move", "Restore", "RestoreReplace",
	"HSet", "HSetNX", "HMSet", "HDel", "HIncrBy", "HIncrByFloat", "HExpire", "HPExpire", "HGetDel", "HSetEX",
	"LPush", "LPushX", "RPush", "RPushX", "LPop", "RPop", "LRem", "LSet", "LInsert", "LInsertBefore", "LInsertAfter", "LTrim", "LMove", "BLMove", "BLPop", "BRPop", "RPopLPush", "BRPopLPush", "LMPop", "BLMPop",
	"SAdd", "SRem", "SPop", "SPopN", "SMove", "SInterStore", "SUnionStore", "SDiffStore",
	"ZAdd", "ZAddNX", "ZAddXX", "ZAddGT", "ZAddLT", "ZAddArgs", "ZAddArgsIncr", "ZIncrBy", "ZRem", "ZRemRangeByRank", "ZRemRangeByScore", "ZRemRangeByLex",
	"ZPopMin", "ZPopMax", "BZPopMin", "BZPopMax", "ZMPop", "BZMPop", "ZUnionStore", "ZInterStore", "ZDiffStore", "ZRangeStore",
	"XAdd", "XDel", "XTrim", "XTrimMaxLen", "XTrimMaxLenApprox", "XTrimMinID", "XTrimMinIDApprox", "XAck", "XClaim", "XClaimJustID", "XAutoClaim", "XAutoClaimJustID",
	"XGroupCreate", "XGroupCreateMkStream", "XGroupDestroy", "XGroupSetID", "XGroupCreateConsumer", "XGroupDelConsumer", "XReadGroup",
	"PFAdd", "PFMerge", "GeoAdd", "GeoRadiusStore", "GeoSearchStore", "Publish", "SPublish",
	"Eval", "EvalSha", "EvalRO", "EvalShaRO", "FCall", "FCallRO", "ScriptLoad", "FunctionLoad", "FunctionLoadReplace", "FunctionDelete", "FunctionFlush",
	"FlushDB", "FlushDBAsync", "FlushAll", "FlushAllAsync", "Do", "Process",
	"JSONSet", "JSONSetMode", "JSONDel", "JSONMerge", "JSONMSet", "JSONArrAppend", "JSONNumIncrBy", "BFAdd", "CFAdd", "TSAdd",
}

// redisTypes are the go-redis types and interfaces its commands are
// methods of (the unexported cmdable, a function type its clients embed,
// declares them).
var redisTypes = []string{"cmdable", "statefulCmdable", "Cmdable", "StatefulCmdable", "UniversalClient", "Pipeliner", "Client", "ClusterClient", "Ring", "Conn", "Tx", "Pipeline", "SentinelClient"}

// redisEntries are the go-redis (v9, v8) and rueidiscompat catalogue
// entries.
func redisEntries() []Entry {
	var out []Entry
	for _, pkg := range []string{"github.com/redis/go-redis/v9", "github.com/go-redis/redis/v8", "github.com/redis/rueidis/rueidiscompat"} {
		for _, t := range redisTypes {
			out = append(out, Entry{Pkg: pkg, Type: t, Names: redisWrites, Kind: KindStore})
		}
	}
	return out
}

// catalogue is the effect catalogue: one table, data only. Whatever is not
// in it (and not reached from it) is not an effect: the idem runtime,
// log, log/slog, OpenTelemetry and metrics clients are never followed
// (see leaf).
var catalogue = []Entry{
	// net/http clients and transports.
	{Pkg: "net/http", Names: []string{"Get", "Post", "PostForm", "Head"}, Kind: KindHTTP},
	{Pkg: "net/http", Type: "Client", Names: []string{"Do", "Get", "Post", "PostForm", "Head"}, Kind: KindHTTP},
	{Pkg: "net/http", Type: "Transport", Names: []string{"RoundTrip"}, Kind: KindHTTP},
	{Pkg: "net/http", Type: "RoundTripper", Names: []string{"RoundTrip"}, Kind: KindHTTP},
	// Raw connections.
	{Pkg: "net", Names: []string{"Dial", "DialTimeout", "DialTCP", "DialUDP", "DialIP", "DialUnix"}, Kind: KindNet},
	{Pkg: "net", Type: "Dialer", Names: []string{"Dial", "DialContext"}, Kind: KindNet},
	// gRPC and Connect clients.
	{Pkg: "google.golang.org/grpc", Type: "ClientConnInterface", Names: []string{"Invoke", "NewStream"}, Kind: KindRPC},
	{Pkg: "google.golang.org/grpc", Type: "ClientConn", Names: []string{"Invoke", "NewStream"}, Kind: KindRPC},
	{Pkg: "google.golang.org/grpc", Names: []string{"Invoke", "NewClientStream"}, Kind: KindRPC},
	{Pkg: "connectrpc.com/connect", Type: "Client", Names: []string{"CallUnary", "CallClientStream", "CallServerStream", "CallBidiStream"}, Kind: KindRPC},
	// Mail.
	{Pkg: "net/smtp", Names: []string{"SendMail"}, Kind: KindMail},
	{Pkg: "net/smtp", Type: "Client", Names: []string{"Mail", "Rcpt", "Data"}, Kind: KindMail},
	// Processes.
	{Pkg: "os/exec", Type: "Cmd", Names: []string{"Run", "Start", "Output", "CombinedOutput"}, Kind: KindProcess},
	{Pkg: "os", Names: []string{"StartProcess"}, Kind: KindProcess},
	// Brokers: NATS, Kafka (segmentio, sarama, confluent), AMQP, SQS/SNS.
	{Pkg: "github.com/nats-io/nats.go", Type: "Conn", Names: []string{"Publish", "PublishMsg", "PublishRequest", "Request", "RequestMsg", "RequestWithContext", "RequestMsgWithContext"}, Kind: KindBroker},
	{Pkg: "github.com/nats-io/nats.go", Type: "JetStreamContext", Names: []string{"Publish", "PublishMsg", "PublishAsync", "PublishMsgAsync"}, Kind: KindBroker},
	{Pkg: "github.com/nats-io/nats.go/jetstream", Type: "JetStream", Names: []string{"Publish", "PublishMsg", "PublishAsync", "PublishMsgAsync"}, Kind: KindBroker},
	{Pkg: "github.com/segmentio/kafka-go", Type: "Writer", Names: []string{"WriteMessages"}, Kind: KindBroker},
	{Pkg: "github.com/segmentio/kafka-go", Type: "Conn", Names: []string{"WriteMessages", "WriteCompressedMessages", "Write"}, Kind: KindBroker},
	{Pkg: "github.com/IBM/sarama", Type: "SyncProducer", Names: []string{"SendMessage", "SendMessages"}, Kind: KindBroker},
	{Pkg: "github.com/IBM/sarama", Type: "AsyncProducer", Names: []string{"Input"}, Kind: KindBroker},
	{Pkg: "github.com/Shopify/sarama", Type: "SyncProducer", Names: []string{"SendMessage", "SendMessages"}, Kind: KindBroker},
	{Pkg: "github.com/Shopify/sarama", Type: "AsyncProducer", Names: []string{"Input"}, Kind: KindBroker},
	{Pkg: "github.com/confluentinc/confluent-kafka-go/v2/kafka", Type: "Producer", Names: []string{"Produce", "ProduceChannel"}, Kind: KindBroker},
	{Pkg: "github.com/confluentinc/confluent-kafka-go/kafka", Type: "Producer", Names: []string{"Produce", "ProduceChannel"}, Kind: KindBroker},
	{Pkg: "github.com/rabbitmq/amqp091-go", Type: "Channel", Names: []string{"Publish", "PublishWithContext", "PublishWithDeferredConfirm", "PublishWithDeferredConfirmWithContext"}, Kind: KindBroker},
	{Pkg: "github.com/streadway/amqp", Type: "Channel", Names: []string{"Publish"}, Kind: KindBroker},
	{Pkg: "github.com/aws/aws-sdk-go-v2/service/sqs", Type: "Client", Kind: KindAWS},
	{Pkg: "github.com/aws/aws-sdk-go-v2/service/sns", Type: "Client", Kind: KindAWS},
	// Stores beside PostgreSQL: Redis (go-redis in redisEntries; rueidis's
	// Do and DoMulti are judged by the command built, see
	// rueidisCommand), memcache, DynamoDB and S3, Elasticsearch and
	// OpenSearch indexing.
	{Pkg: "github.com/bradfitz/gomemcache/memcache", Type: "Client", Names: []string{"Set", "Add", "Replace", "Append", "Prepend", "CompareAndSwap", "Delete", "DeleteAll", "Increment", "Decrement", "Touch", "FlushAll"}, Kind: KindStore},
	{Pkg: "github.com/aws/aws-sdk-go-v2/service/dynamodb", Type: "Client", Names: []string{"PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem", "TransactWriteItems", "ExecuteStatement", "BatchExecuteStatement", "ExecuteTransaction", "CreateTable", "UpdateTable", "DeleteTable", "UpdateTimeToLive", "RestoreTableFromBackup", "CreateBackup", "DeleteBackup", "ImportTable"}, Kind: KindStore},
	{Pkg: "github.com/aws/aws-sdk-go-v2/service/s3", Type: "Client", Names: []string{"PutObject", "DeleteObject", "DeleteObjects", "CopyObject", "CreateMultipartUpload", "UploadPart", "UploadPartCopy", "CompleteMultipartUpload", "AbortMultipartUpload", "PutObjectAcl", "PutObjectTagging", "DeleteObjectTagging", "PutObjectRetention", "PutObjectLegalHold", "RestoreObject", "CreateBucket", "DeleteBucket", "PutBucketPolicy", "PutBucketVersioning", "PutBucketLifecycleConfiguration", "WriteGetObjectResponse"}, Kind: KindStore},
	{Pkg: "github.com/aws/aws-sdk-go-v2/feature/s3/manager", Type: "Uploader", Names: []string{"Upload"}, Kind: KindStore},
	{Pkg: "github.com/aws/aws-sdk-go-v2/feature/s3/transfermanager", Type: "Client", Names: []string{"UploadObject", "UploadDirectory"}, Kind: KindStore},
	{Pkg: "github.com/elastic/go-elasticsearch/v8/esapi", Type: "Index", Func: true, Kind: KindStore},
	{Pkg: "github.com/elastic/go-elasticsearch/v8/esapi", Type: "Create", Func: true, Kind: KindStore},
	{Pkg: "github.com/elastic/go-elasticsearch/v8/esapi", Type: "Update", Func: true, Kind: KindStore},
	{Pkg: "github.com/elastic/go-elasticsearch/v8/esapi", Type: "Delete", Func: true, Kind: KindStore},
	{Pkg: "github.com/elastic/go-elasticsearch/v8/esapi", Type: "Bulk", Func: true, Kind: KindStore},
	{Pkg: "github.com/elastic/go-elasticsearch/v8/esapi", Type: "DeleteByQuery", Func: true, Kind: KindStore},
	{Pkg: "github.com/elastic/go-elasticsearch/v8/esapi", Type: "UpdateByQuery", Func: true, Kind: KindStore},
	{Pkg: "github.com/elastic/go-elasticsearch/v8/esapi", Type: "Reindex", Func: true, Kind: KindStore},
	{Pkg: "github.com/elastic/go-elasticsearch/v8/esapi", Type: "IndexRequest", Names: []string{"Do"}, Kind: KindStore},
	{Pkg: "github.com/elastic/go-elasticsearch/v8/esapi", Type: "CreateRequest", Names: []string{"Do"}, Kind: KindStore},
	{Pkg: "github.com/elastic/go-elasticsearch/v8/esapi", Type: "UpdateRequest", Names: []string{"Do"}, Kind: KindStore},
	{Pkg: "github.com/elastic/go-elasticsearch/v8/esapi", Type: "DeleteRequest", Names: []string{"Do"}, Kind: KindStore},
	{Pkg: "github.com/elastic/go-elasticsearch/v8/esapi", Type: "BulkRequest", Names: []string{"Do"}, Kind: KindStore},
	{Pkg: "github.com/elastic/go-elasticsearch/v8/esapi", Type: "DeleteByQueryRequest", Names: []string{"Do"}, Kind: KindStore},
	{Pkg: "github.com/elastic/go-elasticsearch/v8/esapi", Type: "UpdateByQueryRequest", Names: []string{"Do"}, Kind: KindStore},
	{Pkg: "github.com/elastic/go-elasticsearch/v8/esutil", Type: "BulkIndexer", Names: []string{"Add"}, Kind: KindStore},
	{Pkg: "github.com/elastic/go-elasticsearch/v8/typedapi/core/index", Type: "Index", Names: []string{"Do", "Perform"}, Kind: KindStore},
	{Pkg: "github.com/elastic/go-elasticsearch/v8/typedapi/core/create", Type: "Create", Names: []string{"Do", "Perform"}, Kind: KindStore},
	{Pkg: "github.com/elastic/go-elasticsearch/v8/typedapi/core/update", Type: "Update", Names: []string{"Do", "Perform"}, Kind: KindStore},
	{Pkg: "github.com/elastic/go-elasticsearch/v8/typedapi/core/delete", Type: "Delete", Names: []string{"Do", "Perform"}, Kind: KindStore},
	{Pkg: "github.com/elastic/go-elasticsearch/v8/typedapi/core/bulk", Type: "Bulk", Names: []string{"Do", "Perform"}, Kind: KindStore},
	{Pkg: "github.com/opensearch-project/opensearch-go/v4/opensearchapi", Type: "Client", Names: []string{"Index", "Bulk", "Reindex", "UpdateByQuery"}, Kind: KindStore},
	{Pkg: "github.com/opensearch-project/opensearch-go/v4/opensearchapi", Type: "documentClient", Names: []string{"Create", "Delete", "DeleteByQuery"}, Kind: KindStore},
	{Pkg: "github.com/opensearch-project/opensearch-go/v4/opensearchutil", Type: "BulkIndexer", Names: []string{"Add"}, Kind: KindStore},
	{Pkg: "github.com/opensearch-project/opensearch-go/v2/opensearchapi", Type: "Index", Func: true, Kind: KindStore},
	{Pkg: "github.com/opensearch-project/opensearch-go/v2/opensearchapi", Type: "Create", Func: true, Kind: KindStore},
	{Pkg: "github.com/opensearch-project/opensearch-go/v2/opensearchapi", Type: "Update", Func: true, Kind: KindStore},
	{Pkg: "github.com/opensearch-project/opensearch-go/v2/opensearchapi", Type: "Delete", Func: true, Kind: KindStore},
	{Pkg: "github.com/opensearch-project/opensearch-go/v2/opensearchapi", Type: "Bulk", Func: true, Kind: KindStore},
	{Pkg: "github.com/opensearch-project/opensearch-go/v2/opensearchapi", Type: "IndexRequest", Names: []string{"Do"}, Kind: KindStore},
	{Pkg: "github.com/opensearch-project/opensearch-go/v2/opensearchapi", Type: "BulkRequest", Names: []string{"Do"}, Kind: KindStore},
	// Database handles other than the method's own transaction.
	{Pkg: "github.com/jackc/pgx/v5/pgxpool", Type: "Pool", Names: pgxCalls, Kind: KindDatabase, Static: true},
	{Pkg: "github.com/jackc/pgx/v5/pgxpool", Type: "Conn", Names: pgxCalls, Kind: KindDatabase, Static: true},
	{Pkg: "github.com/jackc/pgx/v5", Type: "Conn", Names: pgxCalls, Kind: KindDatabase, Static: true},
	{Pkg: "database/sql", Type: "DB", Names: sqlCalls, Kind: KindDatabase, Static: true},
	{Pkg: "database/sql", Type: "Conn", Names: sqlCalls, Kind: KindDatabase, Static: true},
	// File writes.
	{Pkg: "os", Names: []string{"WriteFile", "Create", "OpenFile", "Remove", "RemoveAll", "Rename", "Mkdir", "MkdirAll", "MkdirTemp", "CreateTemp", "Truncate", "Symlink", "Link", "Chmod", "Chown", "Chtimes"}, Kind: KindFile, Static: true},
	{Pkg: "os", Type: "File", Names: []string{"Write", "WriteString", "WriteAt", "Truncate", "ReadFrom", "Chmod", "Chown"}, Kind: KindFile, Static: true},
}

func init() { catalogue = append(catalogue, redisEntries()...) }

// Catalogue returns a copy of the effect catalogue, for documentation and
// tools that print it.
func Catalogue() []Entry {
	out := make([]Entry, len(catalogue))
	copy(out, catalogue)
	return out
}

// leafPackages are packages (and the packages below them) whose calls are
// not effects, unless the catalogue names them, and are not followed: the
// store's own runtime and drivers (their calls act on the transaction they
// are given), logging, tracing and metrics.
var leafPackages = []string{
	"github.com/idemgen/idemgen/runtime",
	"log",
	"go.opentelemetry.io",
	"github.com/prometheus",
	// Loggers, metrics, tracing and error reporting (telemetry: what
	// they send is not the method's effect), identifiers, encodings.
	"go.uber.org/zap",
	"github.com/rs/zerolog",
	"github.com/sirupsen/logrus",
	"github.com/go-logr",
	"github.com/go-kit/log",
	"github.com/apex/log",
	"github.com/hashicorp/go-hclog",
	"k8s.io/klog",
	"github.com/golang/glog",
	"github.com/DataDog/datadog-go",
	"github.com/DataDog/dd-trace-go",
	"gopkg.in/DataDog/dd-trace-go.v1",
	"github.com/cactus/go-statsd-client",
	"github.com/smira/go-statsd",
	"github.com/alexcesaro/statsd",
	"github.com/armon/go-metrics",
	"github.com/hashicorp/go-metrics",
	"github.com/rcrowley/go-metrics",
	"github.com/VictoriaMetrics/metrics",
	"github.com/uber-go/tally",
	"go.opencensus.io",
	"github.com/opentracing/opentracing-go",
	"github.com/getsentry/sentry-go",
	"github.com/satori/go.uuid",
	"github.com/lithammer/shortuuid",
	"github.com/matoous/go-nanoid",
	"github.com/jaevor/go-nanoid",
	"github.com/tidwall/gjson",
	"github.com/tidwall/sjson",
	"github.com/mailru/easyjson",
	"github.com/valyala/fastjson",
	"github.com/buger/jsonparser",
	"github.com/segmentio/encoding",
	"github.com/google/uuid",
	"github.com/gofrs/uuid",
	"github.com/oklog/ulid",
	"github.com/segmentio/ksuid",
	"github.com/rs/xid",
	"github.com/goccy/go-json",
	"github.com/json-iterator/go",
	"github.com/bytedance/sonic",
	"google.golang.org/protobuf",
	// The stores beside PostgreSQL: their writes are catalogued, the rest
	// (reads, connection set-up) is not an effect.
	"github.com/redis/go-redis",
	"github.com/go-redis/redis",
	"github.com/redis/rueidis",
	"github.com/bradfitz/gomemcache",
	"github.com/aws/aws-sdk-go-v2/service/dynamodb",
	"github.com/aws/aws-sdk-go-v2/service/s3",
	"github.com/aws/aws-sdk-go-v2/feature/s3",
	"github.com/elastic/go-elasticsearch",
	"github.com/opensearch-project/opensearch-go",
}

// leaf reports whether calls into the package at path are neither effects
// (unless the catalogue says so) nor followed: the leaf packages, the SQL
// libraries (whose statements are judged by their handle) and the
// standard library.
func leaf(path string) bool {
	return under(path, leafPackages) || sqlLibrary(path)
}

// funcEntry finds the catalogue entry of a function type, whose calls
// through a value of it are effects (esapi.Index).
func funcEntry(pkg, typ string) (Entry, bool) {
	for _, e := range catalogue {
		if e.Func && e.Pkg == pkg && e.Type == typ {
			return e, true
		}
	}
	return Entry{}, false
}

// rueidisCommand reports a rueidis Do or DoMulti call whose command (the
// builder method chained after B(): client.B().Set()…Build()) writes,
// or cannot be read.
func rueidisWrite(name string) bool {
	for _, w := range redisWrites {
		if strings.EqualFold(w, name) {
			return true
		}
	}
	return false
}

// lookup finds the catalogue entry of a function (typ "") or method.
func lookup(pkg, typ, name string) (Entry, bool) {
	for _, e := range catalogue {
		if e.Pkg != pkg || e.Type != typ {
			continue
		}
		if e.Func {
			continue
		}
		if e.Names == nil {
			if typ != "" && name != "" && name[0] >= 'A' && name[0] <= 'Z' {
				return e, true
			}
			continue
		}
		for _, n := range e.Names {
			if n == name {
				return e, true
			}
		}
	}
	return Entry{}, false
}
