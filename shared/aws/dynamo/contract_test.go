package dynamo_test

import (
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/urldownloader/urldownloader/internal/moto"
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
		// them until then (the strict layer's reaper does the same).
		IdleExpiry: false,
		Parallel:   true,
		// Every store call is an HTTP round trip to moto (several for an
		// append under contention): a fifth of the racing entries is
		// still 8 appenders racing a consumer.
		Scale: 0.2,
		New: func(t *testing.T, now func() time.Time) storetest.Fixture {
			st, cfg := stack.DeployForTest(t, stack.Options{})
			// The strict layer's TTL reaper judges expiry on the
			// case's clock, so a case that moves it past an item's TTL
			// sees DynamoDB delete the item (at a random point within
			// the 48 h AWS allows).
			cfg.APIOptions = append(cfg.APIOptions, moto.WithClock(now))
			// The contract reads back at once what it wrote, through the
			// store's eventually consistent reads (the due index's Query,
			// the robots cache's GetItem), as SQLite allows; on AWS they
			// may miss a write for up to a second, so the strict layer's
			// stale reads are off for this table.
			if err := moto.SetStrictTable(t.Context(), moto.Shared(t).Endpoint, st.TableName, map[string]any{moto.KnobDynamoStaleReadMs: 0}); err != nil {
				t.Fatal(err)
			}
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
