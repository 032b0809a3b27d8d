package billing_test

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/urldownloader/urldownloader/internal/billing"
)

func s(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
func n(v string) types.AttributeValue { return &types.AttributeValueMemberN{Value: v} }

func TestItemSize(t *testing.T) {
	tests := []struct {
		name string
		item map[string]types.AttributeValue
		want int
	}{
		{"string: name plus bytes", map[string]types.AttributeValue{"pk": s("h#a")}, 2 + 3},
		{"multi-byte string counts UTF-8 bytes", map[string]types.AttributeValue{"u": s("é")}, 1 + 2},
		{"number: 3 digits", map[string]types.AttributeValue{"n": n("123")}, 1 + 3},
		{"number: zero", map[string]types.AttributeValue{"n": n("0")}, 1 + 2},
		{"number: trailing zeroes trimmed", map[string]types.AttributeValue{"n": n("1000")}, 1 + 2},
		{"number: leading zeroes and point", map[string]types.AttributeValue{"n": n("0.0015")}, 1 + 2},
		{"number: negative adds a byte", map[string]types.AttributeValue{"n": n("-1.50")}, 1 + 3},
		{"number: 13-digit millisecond time", map[string]types.AttributeValue{"due": n("1767225600123")}, 3 + 8},
		{"binary: raw bytes", map[string]types.AttributeValue{"b": &types.AttributeValueMemberB{Value: []byte{1, 2, 3}}}, 1 + 3},
		{"bool and null: one byte", map[string]types.AttributeValue{
			"t": &types.AttributeValueMemberBOOL{Value: true}, "z": &types.AttributeValueMemberNULL{Value: true},
		}, 2 + 2},
		{"empty list: 3 bytes", map[string]types.AttributeValue{"q": &types.AttributeValueMemberL{}}, 1 + 3},
		{"list: 3 bytes plus 1 per element", map[string]types.AttributeValue{
			"q": &types.AttributeValueMemberL{Value: []types.AttributeValue{s("ab"), n("1")}},
		}, 1 + 3 + (1 + 2) + (1 + 2)},
		{"map: elements count their names", map[string]types.AttributeValue{
			"m": &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{"i": s("x"), "u": s("yy")}},
		}, 1 + 3 + (1 + 1 + 1) + (1 + 1 + 2)},
		{"list of maps (a queue entry)", map[string]types.AttributeValue{
			"q": &types.AttributeValueMemberL{Value: []types.AttributeValue{
				&types.AttributeValueMemberM{Value: map[string]types.AttributeValue{"i": s("id1"), "u": s("http://a/")}},
			}},
		}, 1 + 3 + 1 + (3 + (1 + 1 + 3) + (1 + 1 + 9))},
		{"sets: sum of elements", map[string]types.AttributeValue{
			"ss": &types.AttributeValueMemberSS{Value: []string{"a", "bc"}},
			"ns": &types.AttributeValueMemberNS{Value: []string{"1", "22"}},
		}, 2 + 3 + 2 + 2 + 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := billing.ItemSize(tc.item); got != tc.want {
				t.Errorf("ItemSize = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestUnits(t *testing.T) {
	tests := []struct {
		name string
		got  float64
		want float64
	}{
		{"write: empty is still 1", billing.WriteUnits(0, 0), 1},
		{"write: 1 KB exactly", billing.WriteUnits(0, 1024), 1},
		{"write: 1 byte over", billing.WriteUnits(0, 1025), 2},
		{"write: larger of old and new", billing.WriteUnits(100_000, 300), 98},
		{"read: 4 KB strongly consistent", billing.ReadUnits(4096, true), 1},
		{"read: 4 KB plus 1", billing.ReadUnits(4097, true), 2},
		{"read: eventually consistent is half", billing.ReadUnits(100, false), 0.5},
		{"read: missing item still costs", billing.ReadUnits(0, true), 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.got != tc.want {
				t.Errorf("got %v, want %v", tc.got, tc.want)
			}
		})
	}
}

func TestIndexWriteUnits(t *testing.T) {
	gsi := []types.GlobalSecondaryIndexDescription{{
		IndexName: aws.String("due-index"),
		KeySchema: []types.KeySchemaElement{
			{AttributeName: aws.String("vs"), KeyType: types.KeyTypeHash},
			{AttributeName: aws.String("due"), KeyType: types.KeyTypeRange},
		},
		Projection: &types.Projection{ProjectionType: types.ProjectionTypeKeysOnly},
	}}
	item := func(kv ...string) map[string]types.AttributeValue {
		m := map[string]types.AttributeValue{"pk": s("h#a"), "sk": s("h")}
		for i := 0; i < len(kv); i += 2 {
			if kv[i] == "vs" || kv[i] == "due" || kv[i] == "v" {
				m[kv[i]] = n(kv[i+1])
			} else {
				m[kv[i]] = s(kv[i+1])
			}
		}
		return m
	}
	tests := []struct {
		name     string
		old, new map[string]types.AttributeValue
		want     float64
	}{
		{"new item in the index: put", nil, item("vs", "3", "due", "100"), 1},
		{"new item outside the sparse index: nothing", nil, item("vs", "3"), 0},
		{"due set on an existing item: put", item("vs", "3"), item("vs", "3", "due", "100"), 1},
		{"non-key change under KEYS_ONLY: nothing", item("vs", "3", "due", "100", "v", "1"), item("vs", "3", "due", "100", "v", "2"), 0},
		{"due changes: delete and put", item("vs", "3", "due", "100"), item("vs", "3", "due", "200"), 2},
		{"due removed: delete", item("vs", "3", "due", "100"), item("vs", "3"), 1},
		{"item deleted from the index: delete", item("vs", "3", "due", "100"), nil, 1},
		{"neither in the index: nothing", item("vs", "3"), item("vs", "3", "x", "y"), 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := billing.IndexWriteUnits("pk", "sk", gsi, tc.old, tc.new); got != tc.want {
				t.Errorf("IndexWriteUnits = %v, want %v", got, tc.want)
			}
		})
	}
}
