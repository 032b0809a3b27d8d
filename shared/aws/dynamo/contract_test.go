package dynamo_test

import (
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/urldownloader/urldownloader/internal/stack"
	"github.com/urldownloader/urldownloader/shared/aws/dynamo"
	"github.com/urldownloader/urldownloader/shared/domain/hostqueue/storetest"
)

// TestContract runs the hostqueue.Store contract, the suite the SQLite
// store passes too, on a table of its own per case. The peer is a second
// store on the same table with its own chunk cache: another Lambda
// instance.
func TestContract(t *testing.T) {
	t.Parallel()
	storetest.Run(t, storetest.Harness{
		// DynamoDB deletes TTL-expired items up to days late and returns
		// them until then; moto never deletes them.
		IdleExpiry: false,
		Parallel:   true,
		// Every store call is an HTTP round trip to moto (several for an
		// append under contention): a fifth of the racing entries is
		// still 8 appenders racing a consumer.
		Scale: 0.2,
		New: func(t *testing.T, now func() time.Time) storetest.Fixture {
			st, cfg := stack.DeployForTest(t, stack.Options{})
			// moto's conditional writes are not atomic (see
			// atomicConditions); the store relies on DynamoDB's.
			c := atomicConditions{Client: dynamodb.NewFromConfig(cfg), mu: &sync.Mutex{}}
			return storetest.Fixture{
				Store: dynamo.New(c, st.TableName, now),
				Peer:  dynamo.New(c, st.TableName, now),
			}
		},
	})
}
