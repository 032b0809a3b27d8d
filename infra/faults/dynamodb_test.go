package faults_test

import (
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/urldownloader/urldownloader/infra/faults"
	"github.com/urldownloader/urldownloader/internal/stack"
	"github.com/urldownloader/urldownloader/shared/aws/config"
)

// TestLostResponse runs the lost-response faults against moto: the write
// is applied every time, and the caller sees what DynamoDB's callers see
// when its answer is lost: the SDK's retry of a conditional write failing
// its condition against the write itself, or an error.
func TestLostResponse(t *testing.T) {
	t.Parallel()
	st, cfg := stack.DeployForTest(t, stack.Options{})
	clean := dynamodb.NewFromConfig(cfg)
	key := func(pk string) map[string]types.AttributeValue {
		return map[string]types.AttributeValue{
			"pk": &types.AttributeValueMemberS{Value: pk},
			"sk": &types.AttributeValueMemberS{Value: "x"},
		}
	}
	exists := func(pk string) bool {
		t.Helper()
		out, err := clean.GetItem(t.Context(), &dynamodb.GetItemInput{TableName: &st.TableName, Key: key(pk), ConsistentRead: aws.Bool(true)})
		if err != nil {
			t.Fatal(err)
		}
		return len(out.Item) > 0
	}
	put := func(c *dynamodb.Client, pk string, cond bool) error {
		in := &dynamodb.PutItemInput{TableName: &st.TableName, Item: key(pk)}
		if cond {
			in.ConditionExpression = aws.String("attribute_not_exists(pk)")
		}
		_, err := c.PutItem(t.Context(), in)
		return err
	}
	conditionFailed := func(err error) bool {
		var cf *types.ConditionalCheckFailedException
		return errors.As(err, &cf)
	}
	lost := func(err error) bool {
		var ae smithy.APIError
		return errors.As(err, &ae) && ae.ErrorCode() == "InternalServerError" && !conditionFailed(err)
	}

	cases := []struct {
		name string
		kind faults.Kind
		// run makes the faulted call on pk (created first by setup when
		// it deletes) and returns its error.
		run       func(c *dynamodb.Client, pk string) error
		setup     bool
		wantErr   func(error) bool
		wantItem  bool
		wantCount int
	}{
		{name: "conditional put, retried: fails against itself", kind: faults.DynamoLostResponse,
			run: func(c *dynamodb.Client, pk string) error { return put(c, pk, true) }, wantErr: conditionFailed, wantItem: true, wantCount: 1},
		{name: "plain put, retried until the SDK gives up", kind: faults.DynamoLostResponse,
			run: func(c *dynamodb.Client, pk string) error { return put(c, pk, false) }, wantErr: lost, wantItem: true, wantCount: config.RetryMaxAttempts},
		{name: "conditional delete, retried: fails against itself", kind: faults.DynamoLostResponse, setup: true,
			run: func(c *dynamodb.Client, pk string) error {
				_, err := c.DeleteItem(t.Context(), &dynamodb.DeleteItemInput{TableName: &st.TableName, Key: key(pk), ConditionExpression: aws.String("attribute_exists(pk)")})
				return err
			}, wantErr: conditionFailed, wantItem: false, wantCount: 1},
		{name: "conditional put, to the caller", kind: faults.DynamoLostResponseToCaller,
			run: func(c *dynamodb.Client, pk string) error { return put(c, pk, true) }, wantErr: lost, wantItem: true, wantCount: 1},
		{name: "delete, to the caller", kind: faults.DynamoLostResponseToCaller, setup: true,
			run: func(c *dynamodb.Client, pk string) error {
				_, err := c.DeleteItem(t.Context(), &dynamodb.DeleteItemInput{TableName: &st.TableName, Key: key(pk)})
				return err
			}, wantErr: lost, wantItem: false, wantCount: 1},
		{name: "reads untouched", kind: faults.DynamoLostResponse, setup: true,
			run: func(c *dynamodb.Client, pk string) error {
				_, err := c.GetItem(t.Context(), &dynamodb.GetItemInput{TableName: &st.TableName, Key: key(pk)})
				return err
			}, wantErr: func(err error) bool { return err == nil }, wantItem: true, wantCount: 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pk := "lost#" + tc.name
			if tc.setup {
				if err := put(clean, pk, false); err != nil {
					t.Fatal(err)
				}
			}
			// Rate 2: every opportunity fires, at the half scale too.
			inj := faults.New(1, 2).Only(tc.kind)
			c := dynamodb.NewFromConfig(cfg, inj.DynamoDBOptions)
			err := tc.run(c, pk)
			if !tc.wantErr(err) {
				t.Errorf("caller saw %v", err)
			}
			if got := exists(pk); got != tc.wantItem {
				t.Errorf("item exists = %v, want %v: the write was not applied as the fault says", got, tc.wantItem)
			}
			if got := inj.Counts()[tc.kind]; got != tc.wantCount {
				t.Errorf("%s counted %d times, want %d (%s)", tc.kind, got, tc.wantCount, inj.Summary())
			}
		})
	}
}
