package moto

import (
	"context"
	"fmt"
	"sync"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"
)

// conditionLocks serialises, within this process, the conditional writes to
// one DynamoDB item. moto 5.2.5 reads the item, evaluates the condition and
// stores the new item in separate, unlocked steps, so two concurrent
// conditional writes on the same version can both succeed (seen as lost
// updates under load; see NOTES.md). DynamoDB itself never does that, and
// the code under test relies on it, so the emulator's gap is closed in the
// client rather than worked around in the code.
var conditionLocks sync.Map // table + key -> *sync.Mutex

// atomicConditions is an SDK middleware for every client made from
// AWSConfig; it only acts on DynamoDB writes that carry a condition.
func atomicConditions(st *middleware.Stack) error {
	return st.Initialize.Add(middleware.InitializeMiddlewareFunc("MotoAtomicConditionalWrites",
		func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			key, ok := conditionalKey(in.Parameters)
			if !ok {
				return next.HandleInitialize(ctx, in)
			}
			m, _ := conditionLocks.LoadOrStore(key, &sync.Mutex{})
			mu := m.(*sync.Mutex)
			mu.Lock()
			defer mu.Unlock()
			return next.HandleInitialize(ctx, in)
		}), middleware.Before)
}

func conditionalKey(params any) (string, bool) {
	switch in := params.(type) {
	case *dynamodb.PutItemInput:
		if in.ConditionExpression != nil {
			return itemKey(in.TableName, in.Item), true
		}
	case *dynamodb.UpdateItemInput:
		if in.ConditionExpression != nil {
			return itemKey(in.TableName, in.Key), true
		}
	case *dynamodb.DeleteItemInput:
		if in.ConditionExpression != nil {
			return itemKey(in.TableName, in.Key), true
		}
	}
	return "", false
}

// itemKey names an item by its table and its pk/sk (the layouts used here);
// other attributes of a Put item do not matter.
func itemKey(table *string, item map[string]types.AttributeValue) string {
	k := fmt.Sprint(deref(table))
	for _, name := range []string{"pk", "sk"} {
		if s, ok := item[name].(*types.AttributeValueMemberS); ok {
			k += "\x00" + s.Value
		}
	}
	return k
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
