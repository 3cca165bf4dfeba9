package effects

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
	"github.com/jackc/pgx",
	"database/sql",
	"log",
	"go.opentelemetry.io",
	"github.com/prometheus",
}

// leaf reports whether calls into the package at path are neither effects
// (unless the catalogue says so) nor followed.
func leaf(path string) bool {
	for _, p := range leafPackages {
		if path == p || strings.HasPrefix(path, p+"/") {
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
