package wiring

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// throttling is a loopback server speaking DynamoDB's JSON protocol that
// throttles the first throttled attempts of every call (the SDK numbers
// them in its amz-sdk-request header) and then answers GetItem with no
// item, as a hot partition or a warming table does.
type throttling struct {
	throttled int
	n         atomic.Int64 // throttles answered
}

func (s *throttling) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var attempt, max int
	fmt.Sscanf(r.Header.Get("amz-sdk-request"), "attempt=%d; max=%d", &attempt, &max)
	w.Header().Set("Content-Type", "application/x-amz-json-1.0")
	if attempt <= s.throttled {
		s.n.Add(1)
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprint(w, `{"__type":"com.amazonaws.dynamodb.v20120810#ProvisionedThroughputExceededException","message":"Throughput exceeds the current capacity"}`)
		return
	}
	fmt.Fprint(w, `{}`)
}

// TestThrottleBurstDoesNotExhaustRetries: the functions' AWS configuration
// (awsFromEnv) rides out a burst of 200 throttles on one client, 100
// concurrent calls throttled twice each, without a call failing: no retry
// budget runs dry ("retry quota exceeded", aws-sdk-go-v2#1665).
func TestThrottleBurstDoesNotExhaustRetries(t *testing.T) {
	srv := &throttling{throttled: 2}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	cfg, err := awsFromEnv(func(k string) string {
		return map[string]string{"AWS_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "a", "AWS_SECRET_ACCESS_KEY": "s", "AWS_ENDPOINT_URL": ts.URL}[k]
	})
	if err != nil {
		t.Fatal(err)
	}
	db := dynamodb.NewFromConfig(cfg)
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	for i := range 100 {
		wg.Go(func() {
			_, err := db.GetItem(t.Context(), &dynamodb.GetItemInput{TableName: aws.String("t"),
				Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: fmt.Sprint(i)}}})
			if err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	var failed []string
	for err := range errs {
		failed = append(failed, err.Error())
	}
	if len(failed) > 0 {
		quota := strings.Contains(strings.Join(failed, "\n"), "retry quota exceeded")
		t.Fatalf("%d of 100 calls failed after %d throttles (retry quota exceeded: %v); first: %s", len(failed), srv.n.Load(), quota, failed[0])
	}
	if got := srv.n.Load(); got != 200 {
		t.Errorf("%d throttles answered, want 200", got)
	}
}
